"""A 429's Retry-After honoured, against a live stack (tests/clients/run.sh):
a key allowed 1 request a minute (EQ_API_KEY_RATE1_PY). The proof is the
count of exchanges, never a measured time: a retry before the window turned
would have been refused again and counted."""

import time
import unittest

from eq_reply import Client, EqReplyError

from helpers import RecordingTransport, env


def exhaust_window(api_key):
    """Requests until the key's window refuses one; returns that 429."""
    c = Client(env("EQ_API_URL"), api_key, max_retries=0)
    for _ in range(3):
        try:
            c.quota()
        except EqReplyError as e:
            if e.status == 429:
                return e
            raise
    raise AssertionError("three requests from a 1-a-minute key were all answered")


class RateLimitTest(unittest.TestCase):
    def test_a_429_is_retried_after_its_retry_after_with_one_idempotency_key(self):
        api_key = env("EQ_API_KEY_RATE1_PY")
        refused = exhaust_window(api_key)
        if refused.retry_after <= 2:
            # The window ends now: the next steps would land in the next one. Start there.
            time.sleep(refused.retry_after + 1)
            refused = exhaust_window(api_key)
        self.assertEqual(refused.code, 429)
        self.assertIn("rate limit", refused.msg)
        self.assertTrue(refused.request_id.startswith("req_"))
        self.assertTrue(1 <= refused.retry_after <= 60, refused.retry_after)

        # A wait budget below Retry-After: the error at once, one exchange.
        hasty = RecordingTransport()
        with self.assertRaises(EqReplyError) as caught:
            Client(env("EQ_API_URL"), api_key, max_retry_wait=0, transport=hasty).reply_async(
                "fast", "在吗？")
        self.assertEqual(caught.exception.status, 429)
        self.assertEqual(len(hasty.calls), 1)

        # Within the budget: one wait of Retry-After, then the next window answers.
        patient = RecordingTransport()
        created = Client(env("EQ_API_URL"), api_key, max_retry_wait=61,
                         transport=patient).reply_async("fast", "在吗？")
        self.assertEqual([c["status"] for c in patient.calls], [429, 200])
        self.assertGreaterEqual(int(patient.calls[0]["retry_after"]), 1)
        self.assertTrue(created.task_id.startswith("tsk_"))
        self.assertEqual([c["idempotency_key"] for c in patient.calls],
                         [created.idempotency_key] * 2)
        self.assertFalse(created.replayed)


if __name__ == "__main__":
    unittest.main()
