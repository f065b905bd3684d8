"""What the live tests share: the stack tests/clients/run.sh started, a
recording transport to count attempts, a webhook receiver, and signatures
made here with hmac (not the library)."""

import base64
import hashlib
import hmac
import os
import queue
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from eq_reply import urllib_transport


def env(name):
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set: run these tests with tests/clients/run.sh")
    return value


class RecordingTransport:
    """urllib's transport, keeping each exchange's status and headers."""

    def __init__(self):
        self.calls = []

    def __call__(self, method, url, headers, body, timeout):
        response = urllib_transport(method, url, headers, body, timeout)
        self.calls.append({"status": response.status,
                           "idempotency_key": headers.get("Idempotency-Key"),
                           "retry_after": response.headers.get("retry-after")})
        return response


class Receiver:
    """A webhook receiver on 127.0.0.1, a free port: each request's raw body and headers."""

    def __init__(self):
        deliveries = self.deliveries = queue.Queue()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                self.send_response(204)
                self.end_headers()
                deliveries.put((body, self.headers))

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def next(self, timeout=20):
        return self.deliveries.get(timeout=timeout)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def sign_both(secret, msg_id, timestamp, body):
    """Both signatures of docs/contract.md §6 over body (bytes)."""
    service = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    key = base64.b64decode(secret[len("whsec_"):])
    signed = f"{msg_id}.{timestamp}.".encode() + body
    standard = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return {"X-Service-Signature": f"sha256={service}", "webhook-id": msg_id,
            "webhook-timestamp": str(timestamp), "webhook-signature": f"v1,{standard}"}
