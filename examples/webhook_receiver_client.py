#!/usr/bin/env python3
"""A webhook receiver built on the Python client (clients/python):
verify_webhook checks either signature and the timestamp, the receiver
dedupes on the delivery id and answers before doing any work (the service
waits at most 10 s for a 2xx).

    pip install ./clients/python
    EQ_WEBHOOK_SECRET=whsec_... python3 examples/webhook_receiver_client.py [PORT]

PORT 0 picks a free one; one JSON line per request. (webhook_receiver.py
beside it does the same with the standard library alone, showing each check.)
"""

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from eq_reply import WebhookVerificationError, verify_webhook

SECRET = os.environ.get("EQ_WEBHOOK_SECRET", "")
seen = set()  # a real receiver keeps these in its database, with an expiry
seen_lock = threading.Lock()


def log(record):
    sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
    sys.stdout.flush()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        if self.path != "/hook":
            self.answer(404)
            return
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        try:
            event = verify_webhook(body, self.headers, SECRET)
        except WebhookVerificationError as e:
            self.answer(401)
            log({"verdict": "rejected", "reason": str(e)})
            return
        self.answer(204)
        delivery_id = self.headers.get("webhook-id") or self.headers.get("X-Service-Delivery")
        with seen_lock:
            fresh = delivery_id not in seen
            seen.add(delivery_id)
        if not fresh:
            log({"verdict": "duplicate", "delivery_id": delivery_id})
            return
        # Here an application stores the replies or notifies someone.
        log({"verdict": "accepted", "delivery_id": delivery_id, "event": event.get("event"),
             "task_id": event.get("task_id")})

    def answer(self, status):
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 9000
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    log({"listening": f"http://127.0.0.1:{server.server_address[1]}/hook"})
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
