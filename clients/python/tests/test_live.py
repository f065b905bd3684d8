"""The Python client against a live stack (tests/clients/run.sh): every
endpoint an API key calls, the error type, idempotency, task polling and the
webhook verifier on a real delivery."""

import base64
import json
import queue
import time
import unittest
import uuid

from eq_reply import (Client, EqReplyError, MonthlyVolume, Quota, WebhookVerificationError,
                      verify_webhook)

from helpers import Receiver, RecordingTransport, env, sign_both

EMOTIONS = {"joy", "affection", "anger", "sadness", "anxiety", "disgust", "surprise", "neutral"}


def client(**kwargs):
    return Client(env("EQ_API_URL"), env("EQ_API_KEY"), **kwargs)


class LiveTest(unittest.TestCase):
    def test_reply_returns_reply_count_replies_best_first(self):
        result = client().reply("fast", "今天被老板骂了，好难过", reply_count=3)
        self.assertEqual(result.mode, "fast")
        self.assertEqual(len(result.replies), 3)
        self.assertTrue(result.request_id.startswith("req_"))
        scores = [r.score for r in result.replies]
        self.assertEqual(scores, sorted(scores, reverse=True))
        for r in result.replies:
            self.assertTrue(r.text and r.eq_analysis)
            self.assertTrue(0 <= r.score <= 1)

    def test_analyze_reads_the_emotion_and_charges_nothing(self):
        c = client()
        before = c.quota()
        a = c.analyze("你最近是不是很忙？都不怎么回我消息了", context="暧昧期")
        self.assertIn(a.emotion, EMOTIONS)
        self.assertTrue(0 <= a.intensity <= 1)
        self.assertTrue(a.underlying_need and a.suggested_strategy and a.relationship_stage)
        self.assertEqual(c.quota().quota, before.quota)

    def test_quota_and_a_sync_reply_takes_one_unit_of_its_mode(self):
        c = client()
        q = c.quota()
        self.assertIsInstance(q, Quota)
        self.assertIn(q.tier, {"free", "pro", "ultra"})
        self.assertRegex(q.expire_at, r"^\d{4}-\d\d-\d\dT")
        # The month's volume (docs/contract.md §11): a new account's limit,
        # one more unit used after the call, over all modes.
        self.assertIsInstance(q.monthly, MonthlyVolume)
        self.assertEqual(q.monthly.limit, 100000)
        self.assertRegex(q.monthly.resets_at, r"^\d{4}-\d\d-01T00:00:00")
        c.reply("standard", "明天面试，有点紧张")
        after = c.quota()
        self.assertEqual(after.quota.standard, q.quota.standard - 1)
        self.assertEqual(after.quota.fast, q.quota.fast)
        self.assertEqual(after.monthly.used, q.monthly.used + 1)

    def test_an_exhausted_mode_is_a_402_not_retried(self):
        transport = RecordingTransport()
        c = Client(env("EQ_API_URL"), env("EQ_API_KEY_NO_PERFECT"), transport=transport)
        with self.assertRaises(EqReplyError) as caught:
            c.reply("perfect", "你好")
        e = caught.exception
        self.assertEqual((e.status, e.code), (402, 402))
        self.assertIn("quota", e.msg)
        self.assertRegex(e.request_id, r"^req_[0-9A-Z]{26}$")
        self.assertEqual(len(transport.calls), 1)
        self.assertEqual(len(c.reply("fast", "你好").replies), 1)

    def test_an_unknown_key_is_a_401_and_a_missing_task_a_404(self):
        with self.assertRaises(EqReplyError) as caught:
            Client(env("EQ_API_URL"), "eq_live_" + "A" * 43).quota()
        self.assertEqual((caught.exception.status, caught.exception.code), (401, 401))
        with self.assertRaises(EqReplyError) as caught:
            client().task("tsk_00000000000000000000000000")
        self.assertEqual(caught.exception.status, 404)

    def test_a_bad_request_is_a_400_naming_the_field(self):
        with self.assertRaises(EqReplyError) as caught:
            client().reply("fast", "hi", reply_count=9)
        self.assertEqual(caught.exception.status, 400)
        self.assertIn("reply_count", caught.exception.msg)

    def test_the_same_idempotency_key_twice_gives_the_same_task(self):
        c = client()
        key = f"py-idem-{uuid.uuid4()}"
        first = c.reply_async("fast", "周末要不要一起去看电影？", scene="dating", idempotency_key=key)
        second = c.reply_async("fast", "周末要不要一起去看电影？", scene="dating", idempotency_key=key)
        self.assertEqual(second.task_id, first.task_id)
        self.assertEqual((first.idempotency_key, first.replayed, second.replayed), (key, False, True))
        # Without one, each call gets a key of its own, returned for repeating it.
        made = c.reply_async("fast", "周末要不要一起去看电影？", scene="dating")
        self.assertNotEqual(made.task_id, first.task_id)
        again = c.reply_async("fast", "周末要不要一起去看电影？", scene="dating",
                              idempotency_key=made.idempotency_key)
        self.assertEqual((again.task_id, again.replayed), (made.task_id, True))


class WebhookTest(unittest.TestCase):
    def setUp(self):
        self.receiver = Receiver()
        self.addCleanup(self.receiver.close)
        self.secret = env("EQ_WEBHOOK_SECRET")

    def test_an_async_reply_is_delivered_verified_and_waited_for(self):
        c = client()
        created = c.reply_async("fast", "我升职了！", reply_count=2, webhook_url=self.receiver.url)
        self.assertRegex(created.task_id, r"^tsk_[0-9A-Z]{26}$")
        task = c.wait_for_task(created.task_id, interval=0.1, timeout=30)
        self.assertEqual(task.status, "succeeded")
        self.assertEqual(len(task.result.replies), 2)

        try:
            body, headers = self.receiver.next()
        except queue.Empty:
            self.fail("no webhook within 20 s")
        event = verify_webhook(body, headers, self.secret)
        self.assertEqual((event["event"], event["task_id"]), ("task.succeeded", created.task_id))
        self.assertEqual([r["text"] for r in event["replies"]], [r.text for r in task.result.replies])

        # Each scheme alone is enough; a plain dict in any case, text, a secret list.
        standard_only = {k: v for k, v in headers.items() if k.lower() != "x-service-signature"}
        verify_webhook(body, standard_only, self.secret)
        verify_webhook(body.decode(), {"x-service-signature": headers["X-Service-Signature"]},
                       [self.other_secret(), self.secret])

        tampered = body.replace(b"succeeded", b"succeedee", 1)
        with self.assertRaisesRegex(WebhookVerificationError,
                                    "webhook-signature does not match; "
                                    "X-Service-Signature does not match"):
            verify_webhook(tampered, headers, self.secret)
        with self.assertRaises(WebhookVerificationError):
            verify_webhook(body, headers, self.other_secret())
        with self.assertRaisesRegex(WebhookVerificationError, "no signature"):
            verify_webhook(body, {"Content-Type": "application/json"}, self.secret)

    def test_a_correctly_signed_but_stale_webhook_is_rejected(self):
        stale = int(time.time()) - 600
        msg_id = "dlv_01JAAAAAAAAAAAAAAAAAAAAAAA"
        body = json.dumps({"event": "test", "delivery_id": msg_id,
                           "created_at": "2026-01-01T00:00:00Z", "timestamp": stale}).encode()
        headers = sign_both(self.secret, msg_id, stale, body)
        standard_only = {k: v for k, v in headers.items() if k != "X-Service-Signature"}
        with self.assertRaisesRegex(WebhookVerificationError, r"webhook-timestamp is 6\d\d s away"):
            verify_webhook(body, standard_only, self.secret)
        with self.assertRaisesRegex(WebhookVerificationError, r"body's timestamp is 6\d\d s away"):
            verify_webhook(body, {"X-Service-Signature": headers["X-Service-Signature"]}, self.secret)
        # Within a wider tolerance it passes: what failed was the age.
        self.assertEqual(verify_webhook(body, headers, self.secret, tolerance_seconds=3600)["event"],
                         "test")

    @staticmethod
    def other_secret():
        return "whsec_" + base64.b64encode(bytes([7]) * 32).decode()


if __name__ == "__main__":
    unittest.main()
