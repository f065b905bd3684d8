"""The client's own rules, with a scripted transport instead of a service:
which answers are retried and how often, wait_for_task's bound, the records
(the month's volume among them), the package's metadata, bad arguments."""

import json
import os
import re
import unittest

from eq_reply import (Client, EqReplyError, HttpResponse, MonthlyVolume, Quota, TaskWaitTimeout,
                      __version__)

CREATED = {"task_id": "tsk_01JAAAAAAAAAAAAAAAAAAAAAAA", "status": "queued"}


class Scripted:
    """Answers from a list of (status, body, headers); records each request."""

    def __init__(self, *answers):
        self.answers = answers
        self.requests = []

    def __call__(self, method, url, headers, body, timeout):
        self.requests.append({"method": method, "url": url, "headers": headers, "body": body})
        status, body, extra = self.answers[min(len(self.requests), len(self.answers)) - 1]
        raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        headers = {"x-request-id": f"req_{len(self.requests)}", **{k.lower(): v for k, v in extra.items()}}
        return HttpResponse(status, headers, raw)


def ok(data):
    return (200, {"code": 0, "msg": "ok", "data": data}, {})


def err(status, **headers):
    return (status, {"code": status, "msg": f"error {status}", "data": None},
            {k.replace("_", "-"): v for k, v in headers.items()})


def make(transport, **kwargs):
    return Client("http://svc.test/", "k", transport=transport, **kwargs)


class RetryTest(unittest.TestCase):
    def test_503_and_429_are_retried_with_one_idempotency_key(self):
        s = Scripted(err(503, Retry_After="0"), err(429, Retry_After="0"), ok(CREATED))
        created = make(s).reply_async("fast", "hi")
        self.assertEqual(len(s.requests), 3)
        self.assertEqual({r["headers"]["Idempotency-Key"] for r in s.requests}, {created.idempotency_key})
        self.assertEqual(s.requests[0]["url"], "http://svc.test/api/v1/reply/async")

        always = Scripted(err(503, Retry_After="0"))
        with self.assertRaises(EqReplyError) as caught:
            make(always).quota()
        self.assertEqual(caught.exception.status, 503)
        self.assertEqual(len(always.requests), 4)  # the call and 3 retries

        once = Scripted(err(429, Retry_After="0"))
        with self.assertRaises(EqReplyError) as caught:
            make(once, max_retries=1).quota()
        self.assertEqual(caught.exception.request_id, "req_2")
        self.assertEqual(len(once.requests), 2)

    def test_a_retry_after_beyond_the_budget_is_not_waited_for(self):
        s = Scripted(err(429, Retry_After="30"))
        with self.assertRaises(EqReplyError) as caught:
            make(s, max_retry_wait=29.9).quota()
        self.assertEqual(caught.exception.retry_after, 30)
        self.assertEqual(len(s.requests), 1)
        date = Scripted(err(503, Retry_After="Fri, 01 Jan 2100 00:00:00 GMT"))
        with self.assertRaises(EqReplyError) as caught:
            make(date).quota()
        self.assertGreater(caught.exception.retry_after, 3600)
        self.assertEqual(len(date.requests), 1)

    def test_other_errors_are_not_retried_and_a_proxy_page_is_an_eq_reply_error(self):
        for status in (400, 401, 402, 404, 409, 500, 504):
            s = Scripted(err(status, Retry_After="0"))
            with self.assertRaises(EqReplyError) as caught:
                make(s).reply("fast", "hi")
            self.assertEqual(caught.exception.status, status)
            self.assertEqual(len(s.requests), 1, status)
        proxy = Scripted((502, "<html>Bad Gateway</html>", {}))
        with self.assertRaises(EqReplyError) as caught:
            make(proxy).quota()
        self.assertEqual((caught.exception.status, caught.exception.code), (502, 502))
        self.assertIn("without the service's JSON envelope", caught.exception.msg)

    def test_requests_carry_the_key_and_json(self):
        s = Scripted(ok({"replies": [], "request_id": "req_x", "mode": "fast", "tokens_used": 1}))
        make(s).reply("fast", "你好", scene="work")
        r = s.requests[0]
        self.assertEqual(r["method"], "POST")
        self.assertEqual(r["headers"]["Authorization"], "Bearer k")
        self.assertTrue(r["headers"]["Content-Type"].startswith("application/json"))
        self.assertNotIn("Idempotency-Key", r["headers"])
        self.assertEqual(json.loads(r["body"]), {"mode": "fast", "message": "你好", "scene": "work"})
        with self.assertRaisesRegex(ValueError, "task: the service's answer has no 'task_id'"):
            make(s).task("tsk_a/b")  # answered with a reply: not a task record
        self.assertEqual(s.requests[1]["url"], "http://svc.test/api/v1/task/tsk_a%2Fb")


class WaitTest(unittest.TestCase):
    @staticmethod
    def task(status):
        return ok({**CREATED, "status": status, "mode": "fast", "created_at": "2026-01-01T00:00:00.000Z",
                   "started_at": None, "finished_at": None, "result": None, "error": None,
                   "webhook": None})

    def test_polls_to_the_end_and_gives_up_at_its_bound(self):
        s = Scripted(self.task("queued"), self.task("running"), self.task("succeeded"))
        self.assertEqual(make(s).wait_for_task(CREATED["task_id"], interval=0).status, "succeeded")
        self.assertEqual(len(s.requests), 3)
        self.assertEqual(make(Scripted(self.task("failed"))).wait_for_task("t").status, "failed")
        stuck = Scripted(self.task("running"))
        with self.assertRaises(TaskWaitTimeout) as caught:
            make(stuck).wait_for_task(CREATED["task_id"], timeout=0)
        self.assertEqual((caught.exception.task_id, caught.exception.last_status),
                         (CREATED["task_id"], "running"))
        self.assertEqual(len(stuck.requests), 1)


class RecordTest(unittest.TestCase):
    QUOTA = {"quota": {"standard": 1, "fast": 2, "perfect": 0}, "expire_at": "2026-12-22T07:48:00+00:00",
             "tier": "free"}

    def test_quota_without_and_with_the_months_volume(self):
        q = Quota.from_dict(self.QUOTA)
        self.assertEqual((q.quota.fast, q.tier, q.monthly), (2, "free", None))
        q = Quota.from_dict({**self.QUOTA, "monthly": {"limit": 100000, "used": 7,
                                                       "resets_at": "2027-01-01T00:00:00Z"}})
        self.assertEqual(q.monthly, MonthlyVolume(100000, 7, "2027-01-01T00:00:00Z"))
        unlimited = Quota.from_dict({**self.QUOTA, "monthly": {"limit": None, "used": 0,
                                                               "resets_at": "2027-01-01T00:00:00Z"}})
        self.assertIsNone(unlimited.monthly.limit)
        # A field the service adds later is ignored, one it drops is an error.
        self.assertEqual(Quota.from_dict({**self.QUOTA, "new_field": 1}).tier, "free")
        with self.assertRaisesRegex(ValueError, "'tier'"):
            Quota.from_dict({k: v for k, v in self.QUOTA.items() if k != "tier"})

    def test_the_version_is_the_one_in_pyproject(self):
        path = os.path.join(os.path.dirname(__file__), "..", "pyproject.toml")
        with open(path, encoding="utf-8") as f:
            self.assertIn(f'version = "{__version__}"', f.read())


class ArgumentTest(unittest.TestCase):
    def test_bad_arguments_are_value_errors_naming_what_is_wrong(self):
        s = Scripted(ok(CREATED))
        for kwargs, what in (({"base_url": "svc.test"}, "absolute"), ({"base_url": "ftp://x"}, "absolute"),
                             ({"api_key": " "}, "api_key"), ({"max_retries": -1}, "max_retries"),
                             ({"max_retry_wait": "5"}, "max_retry_wait"), ({"timeout": 0}, "timeout")):
            args = {"base_url": "http://svc.test", "api_key": "k", **kwargs}
            with self.assertRaisesRegex(ValueError, what):
                Client(args.pop("base_url"), args.pop("api_key"), transport=s, **args)
        with self.assertRaisesRegex(ValueError, "idempotency_key"):
            make(s).reply_async("fast", "hi", idempotency_key="é")
        with self.assertRaisesRegex(ValueError, "task_id"):
            make(s).task("")
        with self.assertRaisesRegex(ValueError, "interval"):
            make(s).wait_for_task("t", interval=-1)
        self.assertEqual(s.requests, [])
        self.assertTrue(re.fullmatch(r"\d+\.\d+\.\d+", __version__))


if __name__ == "__main__":
    unittest.main()
