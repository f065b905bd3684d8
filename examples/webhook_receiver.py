#!/usr/bin/env python3
"""A webhook receiver for EQ Reply, standard library only.

EQ Reply signs every webhook twice with the account's secret (whsec_...,
printed once by `eqctl key create`):

  X-Service-Signature: sha256=<hex HMAC-SHA256(secret as printed, raw body)>
  webhook-id, webhook-timestamp,
  webhook-signature:   v1,<base64 HMAC-SHA256(base64-decoded part after
                       "whsec_", "<webhook-id>.<webhook-timestamp>.<raw body>")>

This receiver checks both (a real receiver needs only one; checking both
shows how each works), refuses stale or future timestamps, dedupes on the
delivery id (deliveries are at-least-once), and answers before doing any
work, because the service counts an attempt as failed if no 2xx arrives
within 10 s.

Two kinds of event arrive, both signed the same way:
  task.succeeded, task.failed  a task's result (X-Service-Event names it)
  test                         the developer center's "Send test event":
                               {"event": "test", "delivery_id", "created_at",
                               "timestamp"}, no task; verified, answered 204
                               and logged as a test, nothing else

    EQ_WEBHOOK_SECRET=whsec_... python3 webhook_receiver.py --port 9000

Answers:
  204  verified (or a duplicate of a delivery already accepted)
  400  webhook-id or webhook-timestamp is missing or malformed, the body is not the JSON
       the service sends (a task event or a test event), or the timestamp is
       more than --tolerance seconds away from now (a replayed or delayed
       request)
  401  a signature is missing or does not match
  404  another path than --path

Every request prints one JSON line on stdout, for example
  {"verdict": "accepted", "delivery_id": "dlv_...", "task_id": "tsk_...",
   "event": "task.succeeded", "verified": ["x-service-signature", "standard-webhooks"]}
  {"verdict": "accepted", "delivery_id": "dlv_...", "event": "test",
   "verified": ["x-service-signature", "standard-webhooks"]}
  {"verdict": "rejected", "status": 401, "reason": "webhook-signature does not match"}
"""

import argparse
import base64
import binascii
import hashlib
import hmac
import json
import os
import queue
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# The Standard Webhooks spec suggests 5 minutes. The service signs each
# attempt afresh, so even a retry hours later carries a current timestamp.
DEFAULT_TOLERANCE_S = 300
MAX_BODY = 1 << 20  # the service's bodies are a few KiB; refuse anything absurd


class Rejected(Exception):
    def __init__(self, status, reason):
        super().__init__(reason)
        self.status = status
        self.reason = reason


def verify_service_signature(secret, body, header):
    """X-Service-Signature: the HMAC key is the secret string exactly as
    printed, "whsec_" included (the GitHub-style scheme)."""
    if not header:
        raise Rejected(401, "missing X-Service-Signature")
    if not header.startswith("sha256="):
        raise Rejected(400, "X-Service-Signature is not sha256=<hex>")
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    # compare_digest: a plain == would leak through timing how many leading
    # characters of a forged signature were right.
    if not hmac.compare_digest(expected, header[len("sha256="):].lower()):
        raise Rejected(401, "X-Service-Signature does not match")


def standard_webhooks_key(secret):
    if not secret.startswith("whsec_"):
        raise ValueError("the secret must start with whsec_")
    return base64.b64decode(secret[len("whsec_"):], validate=True)


def verify_standard_signature(key, body, msg_id, timestamp, header):
    """webhook-signature: "v1,<base64>" entries separated by spaces (a sender
    rotating secrets may send several); one match is enough."""
    if not header:
        raise Rejected(401, "missing webhook-signature")
    signed = msg_id.encode() + b"." + timestamp.encode() + b"." + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    for entry in header.split():
        version, _, sig = entry.partition(",")
        if version == "v1" and hmac.compare_digest(expected, sig):
            return
    raise Rejected(401, "webhook-signature does not match")


def check_timestamp(value, what, tolerance_s, now):
    try:
        ts = int(value)
    except (TypeError, ValueError):
        raise Rejected(400, f"{what} is not unix seconds")
    if abs(now - ts) > tolerance_s:
        raise Rejected(400, f"{what} is {now - ts} s away from now (tolerance {tolerance_s} s)")
    return ts


class Receiver:
    """What the handler threads share: the secret, the ids already accepted,
    and the queue of events for the worker thread."""

    def __init__(self, secret, tolerance_s):
        self.secret = secret
        self.key = standard_webhooks_key(secret)
        self.tolerance_s = tolerance_s
        self.seen = set()  # a real receiver keeps these in its database, with an expiry
        self.lock = threading.Lock()
        self.events = queue.Queue()

    def verify(self, headers, body):
        """Returns the parsed event, or raises Rejected."""
        msg_id = headers.get("webhook-id")
        timestamp = headers.get("webhook-timestamp")
        if not msg_id or not timestamp:
            raise Rejected(400, "missing webhook-id or webhook-timestamp")
        # Signatures first: an attacker must not learn anything about the
        # payload checks from a forged request.
        verify_service_signature(self.secret, body, headers.get("X-Service-Signature"))
        verify_standard_signature(self.key, body, msg_id, timestamp,
                                  headers.get("webhook-signature"))
        now = int(time.time())
        check_timestamp(timestamp, "webhook-timestamp", self.tolerance_s, now)
        try:
            event = json.loads(body)
        except ValueError:
            raise Rejected(400, "body is not JSON")
        # The event is read from the signed body, not from X-Service-Event,
        # which no signature covers.
        if not isinstance(event, dict):
            raise Rejected(400, "body is not a JSON object")
        if event.get("event") == "test":
            if event.get("delivery_id") != msg_id:
                raise Rejected(400, "test event: delivery_id and webhook-id differ")
        elif "task_id" not in event:
            raise Rejected(400, "body is neither a task event nor a test event")
        # X-Service-Signature covers the body only; the body's own timestamp
        # is what protects that scheme against replays.
        check_timestamp(event.get("timestamp"), "body timestamp", self.tolerance_s, now)
        if headers.get("X-Service-Delivery", msg_id) != msg_id:
            raise Rejected(400, "X-Service-Delivery and webhook-id differ")
        return msg_id, event

    def first_time(self, delivery_id):
        with self.lock:
            if delivery_id in self.seen:
                return False
            self.seen.add(delivery_id)
            return True


# Handlers answer first and log after, each request on its own thread, and
# the worker thread logs too: print() writes the text and the newline
# separately, so two records could share a line. One write under a lock
# keeps every record on a line of its own.
_log_lock = threading.Lock()


def log(record):
    line = json.dumps(record, ensure_ascii=False) + "\n"
    with _log_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def make_handler(receiver, path):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the dispatcher reuses connections

        def do_POST(self):
            if self.path != path:
                self.answer(404)
                log({"verdict": "rejected", "status": 404, "reason": f"path {self.path}"})
                return
            try:
                length = int(self.headers.get("Content-Length", ""))
            except ValueError:
                self.answer(411)
                return
            if length < 0 or length > MAX_BODY:
                self.answer(413)
                self.close_connection = True
                return
            body = self.rfile.read(length)
            try:
                delivery_id, event = receiver.verify(self.headers, body)
            except Rejected as r:
                self.answer(r.status)
                log({"verdict": "rejected", "status": r.status, "reason": r.reason})
                return
            fresh = receiver.first_time(delivery_id)
            # Answer first, work later: the service waits at most 10 s.
            self.answer(204)
            if event.get("event") == "test":
                # The developer center shows this answer; there is no work.
                log({"verdict": "accepted" if fresh else "duplicate",
                     "delivery_id": delivery_id, "event": "test",
                     "verified": ["x-service-signature", "standard-webhooks"]})
            elif fresh:
                receiver.events.put((delivery_id, event))
            else:
                log({"verdict": "duplicate", "delivery_id": delivery_id,
                     "task_id": event.get("task_id")})

        def answer(self, status):
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, fmt, *args):  # one JSON line per request is enough
            pass

    return Handler


def worker(receiver):
    """Where a real application would store the replies or notify a user."""
    while True:
        delivery_id, event = receiver.events.get()
        replies = event.get("replies") or []
        log({"verdict": "accepted", "delivery_id": delivery_id,
             "task_id": event.get("task_id"), "event": event.get("event"),
             "status": event.get("status"), "replies": len(replies),
             "verified": ["x-service-signature", "standard-webhooks"]})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=9000, help="0 picks a free port")
    ap.add_argument("--path", default="/hook")
    ap.add_argument("--tolerance", type=int, default=DEFAULT_TOLERANCE_S,
                    help="seconds a timestamp may differ from now (default 300)")
    args = ap.parse_args()
    secret = os.environ.get("EQ_WEBHOOK_SECRET", "")
    try:
        receiver = Receiver(secret, args.tolerance)
    except (ValueError, binascii.Error) as e:
        sys.exit(f"EQ_WEBHOOK_SECRET: {e} (use the whsec_ secret eqctl key create printed)")
    server = ThreadingHTTPServer((args.host, args.port), make_handler(receiver, args.path))
    threading.Thread(target=worker, args=(receiver,), daemon=True).start()
    host, port = server.server_address[:2]
    # SIGTERM (docker stop, a supervisor) ends the process cleanly.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    log({"listening": f"http://{host}:{port}{args.path}"})
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
