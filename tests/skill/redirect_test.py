#!/usr/bin/env python3
"""The skill script never sends the API key to another origin (issue 27).

integrations/skill/scripts/eqreply.py is run against a stand-in service that
answers with redirects: to another port, to another host name for the same
address, and (the control) to another path of its own origin. The key must
arrive only at the service's own origin; the others must see no
Authorization header at all.

    python3 tests/skill/redirect_test.py     (ctest: skill_redirect)
"""

import http.server
import json
import os
import subprocess
import sys
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "integrations", "skill", "scripts", "eqreply.py")
KEY = "eq_live_redirect-test-key-never-elsewhere"

seen = []  # (server name, path, Authorization header or None)


def make_handler(name, routes):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append((name, self.path, self.headers.get("Authorization")))
            target = routes.get(self.path)
            if target is not None:
                self.send_response(302)
                self.send_header("Location", target)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = json.dumps({"code": 0, "msg": "ok", "data": {"quota": {}}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    return Handler


def serve(name, routes):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), make_handler(name, routes))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def run_quota(base_url):
    env = dict(os.environ, EQ_API_URL=base_url, EQ_API_KEY=KEY)
    done = subprocess.run([sys.executable, SCRIPT, "--retries", "0", "quota"], env=env,
                          capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout + done.stderr


def main():
    other = serve("other", {})
    routes = {}
    service = serve("service", routes)
    sp, op = service.server_address[1], other.server_address[1]
    routes.update({
        # Another port: another origin.
        "/port/api/v1/quota": f"http://127.0.0.1:{op}/api/v1/quota",
        # The same address under another host name: another origin too.
        "/host/api/v1/quota": f"http://localhost:{sp}/landed/api/v1/quota",
        # A path of the service's own origin: the key may follow.
        "/same/api/v1/quota": f"http://127.0.0.1:{sp}/landed/api/v1/quota",
    })
    failures = []
    for prefix, expect_key_at_end in (("port", False), ("host", False), ("same", True)):
        seen.clear()
        rc, out = run_quota(f"http://127.0.0.1:{sp}/{prefix}")
        if rc != 0:
            failures.append(f"{prefix}: eqreply.py exited {rc}: {out}")
            continue
        if len(seen) != 2:
            failures.append(f"{prefix}: expected 2 requests (redirect, target), saw {seen}")
            continue
        first, last = seen
        if first[2] != f"Bearer {KEY}":
            failures.append(f"{prefix}: the service itself got Authorization {first[2]!r}")
        got = last[2]
        if expect_key_at_end and got != f"Bearer {KEY}":
            failures.append(f"{prefix}: a same-origin redirect lost the key ({got!r})")
        if not expect_key_at_end and got is not None:
            failures.append(f"{prefix}: the key went to another origin: {last}")
    for server in (service, other):
        server.shutdown()
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures), file=sys.stderr)
        return 1
    print("skill_redirect: the key followed a same-origin redirect and no cross-origin one")
    return 0


if __name__ == "__main__":
    sys.exit(main())
