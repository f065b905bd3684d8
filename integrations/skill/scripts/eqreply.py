#!/usr/bin/env python3
"""eqreply: the EQ Reply API from the command line, for AI agents and people.

Python 3 standard library only, so an agent can run it wherever the skill
folder is copied. Every command prints exactly one JSON object on stdout:

    {"ok": true, "data": {...}}                      the API's `data`
    {"ok": false, "status": 402, "code": 402,        the API's error, plus
     "msg": "...", "request_id": "...",              what to do about it
     "retryable": false, "retry_after": null, "hint": "..."}

Exit status: 0 success, 1 the API answered with an error, 2 bad usage
(the same object with "status": null, the problem in "msg" and the
command's "usage"), 3 the API could not be reached.

Configuration: EQ_API_KEY (required, never printed), EQ_API_URL (default
http://127.0.0.1:8080).

Retries: 429 and 503 are retried after the server's Retry-After (at most
--max-wait seconds each, --retries times). Reply calls always carry an
Idempotency-Key, so a retry after a lost connection or a 503 can never charge
twice; 504 (refunded by the server) is retried the same way. 400, 401, 402,
404 and 409 are never retried: they need a different request.
"""

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

MODES = ("fast", "standard", "perfect")
SCENES = ("chat", "ambiguous", "dating", "humor", "conflict", "social", "work", "breakup",
          "proposal")
# A sync call waits at most the server's deadline for its mode (180 s for
# perfect); the client waits a little longer so the server's 504 arrives.
SYNC_TIMEOUT_S = 200
RETRYABLE = {429, 503, 504}
HINTS = {
    400: "the request is invalid; msg names the field and what is allowed",
    401: "the API key is missing, wrong, revoked or expired; do not retry with the same key",
    402: "this mode's quota is used up or expired; try another mode or ask the account owner",
    404: "no such task for this key",
    409: "the Idempotency-Key was used before with a different body; use a new key",
    429: "rate limit exceeded; wait retry_after seconds",
    500: "generation failed on the server; the unit was refunded; retrying once is reasonable",
    503: "the service is temporarily unavailable; wait retry_after seconds",
    504: "generation timed out; the unit was refunded; retry, or use --async for slow modes",
}


class ApiError(Exception):
    def __init__(self, status, envelope, headers):
        super().__init__(envelope.get("msg", ""))
        self.status = status
        self.envelope = envelope
        self.retry_after = retry_after_of(headers)
        self.request_id = headers.get("X-Request-Id") if headers is not None else None


class Unreachable(Exception):
    pass


def origin_of(url):
    """(scheme, host, port) of a URL, the port spelled out when implied."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or {"http": 80, "https": 443}.get(scheme)
    return scheme, (parts.hostname or "").lower(), port


class SameOriginAuthRedirects(urllib.request.HTTPRedirectHandler):
    """Follows redirects as urllib does, but the API key never leaves the
    origin it was meant for: on a redirect to another scheme, host or port
    the Authorization header is dropped (as curl and browsers do), so a
    proxy or a compromised server cannot send the key elsewhere. The other
    origin then answers 401 like any request without a key. Once dropped it
    stays dropped, even if a later redirect comes back."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and origin_of(new.full_url) != origin_of(req.full_url):
            new.remove_header("Authorization")
        return new


class Client:
    def __init__(self, base_url, api_key, retries, max_wait):
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.retries = retries
        self.max_wait = max_wait
        self.opener = urllib.request.build_opener(SameOriginAuthRedirects)

    def call(self, method, path, body=None, idempotency_key=None, timeout=30):
        """Returns the envelope's data; raises ApiError or Unreachable after
        the retries allowed."""
        attempt = 0
        while True:
            try:
                return self._once(method, path, body, idempotency_key, timeout)
            except ApiError as e:
                if e.status not in RETRYABLE or attempt >= self.retries:
                    raise
                # A POST without an Idempotency-Key is not safe to repeat
                # after a 504: the call may have been charged and answered.
                if method == "POST" and idempotency_key is None and e.status == 504:
                    raise
                wait = e.retry_after if e.retry_after is not None else 2 ** attempt
            except Unreachable:
                if attempt >= self.retries or (method == "POST" and idempotency_key is None):
                    raise
                wait = 2 ** attempt
            attempt += 1
            wait = min(max(wait, 0), self.max_wait)
            log(f"retrying {method} {path} in {wait} s (attempt {attempt + 1})")
            time.sleep(wait)

    def _once(self, method, path, body, idempotency_key, timeout):
        headers = {"Authorization": f"Bearer {self.api_key}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body, ensure_ascii=False).encode("utf-8")
            headers["Content-Type"] = "application/json; charset=utf-8"
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        req = urllib.request.Request(self.base_url + path, data=data, headers=headers,
                                     method=method)
        try:
            with self.opener.open(req, timeout=timeout) as resp:
                return parse_envelope(resp.status, resp.read())["data"]
        except urllib.error.HTTPError as e:
            envelope = parse_envelope(e.code, e.read())
            raise ApiError(e.code, envelope, e.headers) from None
        except (urllib.error.URLError, OSError) as e:
            raise Unreachable(f"{self.base_url}: {getattr(e, 'reason', e)}") from None


def parse_envelope(status, raw):
    try:
        envelope = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        envelope = None
    if not isinstance(envelope, dict) or "code" not in envelope:
        # Not the service's envelope: a proxy's error page, say.
        return {"code": status, "msg": f"HTTP {status} without the service's JSON envelope",
                "data": None}
    return envelope


def retry_after_of(headers):
    value = headers.get("Retry-After") if headers is not None else None
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def log(text):
    print(f"eqreply: {text}", file=sys.stderr)


def read_message(value):
    """`-` reads the message from standard input (for long or multi-line text)."""
    if value == "-":
        return sys.stdin.read()
    return value


def reply_body(args):
    body = {"mode": args.mode, "message": read_message(args.message)}
    if args.context:
        body["context"] = args.context
    if args.scene:
        body["scene"] = args.scene
    if args.count != 1:
        body["reply_count"] = args.count
    if getattr(args, "webhook_url", None):
        body["webhook_url"] = args.webhook_url
    return body


def wait_for_task(client, task_id, timeout_s):
    """Polls the task until it has ended; backs off from 0.5 s to 5 s."""
    deadline = time.monotonic() + timeout_s
    delay = 0.5
    while True:
        task = client.call("GET", f"/api/v1/task/{task_id}")
        if task.get("status") in ("succeeded", "failed"):
            return task
        if time.monotonic() + delay > deadline:
            task["wait_timed_out"] = True
            return task
        time.sleep(delay)
        delay = min(delay * 2, 5.0)


def cmd_reply(client, args):
    key = args.idempotency_key or f"eqreply-{uuid.uuid4()}"
    if not args.use_async:
        return client.call("POST", "/api/v1/reply", reply_body(args), key, SYNC_TIMEOUT_S)
    created = client.call("POST", "/api/v1/reply/async", reply_body(args), key)
    if not args.wait:
        return created
    return wait_for_task(client, created["task_id"], args.timeout)


def cmd_analyze(client, args):
    body = {"message": read_message(args.message)}
    if args.context:
        body["context"] = args.context
    return client.call("POST", "/api/v1/analyze", body)


def cmd_quota(client, _args):
    return client.call("GET", "/api/v1/quota")


def cmd_task(client, args):
    if args.wait:
        return wait_for_task(client, args.task_id, args.timeout)
    return client.call("GET", f"/api/v1/task/{args.task_id}")


class UsageError(Exception):
    def __init__(self, msg, usage):
        super().__init__(msg)
        self.msg = msg
        self.usage = usage


class JsonErrorParser(argparse.ArgumentParser):
    """argparse prints its errors as text and exits 2; an agent reads one
    JSON object on stdout whatever happens (SKILL.md), so a bad argument
    becomes the same error object as an API error, with status null, and
    exit status 2. Subcommand parsers are of this class too (argparse makes
    them with the parent's class). --help still prints text and exits 0."""

    def error(self, message):
        raise UsageError(message, self.format_usage().strip())


def usage_error(e):
    print(json.dumps({
        "ok": False, "status": None, "code": None, "msg": e.msg, "request_id": None,
        "retryable": False, "retry_after": None, "usage": e.usage,
        "hint": "fix the arguments; `eqreply.py COMMAND --help` lists them",
    }, ensure_ascii=False))
    return 2


def build_parser():
    p = JsonErrorParser(prog="eqreply", description=__doc__.split("\n\n")[0])
    p.add_argument("--retries", type=int, default=3,
                   help="retries of a 429, 503, 504 or lost connection (default 3)")
    p.add_argument("--max-wait", type=int, default=60,
                   help="longest wait before one retry, seconds (default 60)")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("reply", help="candidate replies to a message someone received")
    r.add_argument("message", help="the other person's message ('-' reads standard input)")
    r.add_argument("--mode", choices=MODES, default="fast")
    r.add_argument("--context", help="relationship stage and background")
    r.add_argument("--scene", choices=SCENES)
    r.add_argument("--count", type=int, default=1, choices=range(1, 6), metavar="1..5",
                   help="number of candidate replies (default 1)")
    r.add_argument("--async", dest="use_async", action="store_true",
                   help="create a task instead of waiting for the answer")
    r.add_argument("--webhook-url", help="with --async: where the result is POSTed")
    r.add_argument("--wait", action="store_true", help="with --async: poll until the task ends")
    r.add_argument("--timeout", type=int, default=300, help="with --wait: seconds (default 300)")
    r.add_argument("--idempotency-key",
                   help="the same key and body within 24 h return the first answer "
                        "(default: a new key per run, reused by its retries)")
    r.set_defaults(run=cmd_reply)

    a = sub.add_parser("analyze", help="emotion, intensity, need and strategy; charges nothing")
    a.add_argument("message", help="the message ('-' reads standard input)")
    a.add_argument("--context")
    a.set_defaults(run=cmd_analyze)

    q = sub.add_parser("quota", help="remaining units per mode, expiry and tier")
    q.set_defaults(run=cmd_quota)

    t = sub.add_parser("task", help="an async task's status, result, error and webhook")
    t.add_argument("task_id")
    t.add_argument("--wait", action="store_true", help="poll until the task ends")
    t.add_argument("--timeout", type=int, default=300)
    t.set_defaults(run=cmd_task)
    return p


def parse_arguments(argv):
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "wait", False) and args.command == "reply" and not args.use_async:
        parser.error("--wait needs --async")
    if getattr(args, "webhook_url", None) and not args.use_async:
        parser.error("--webhook-url needs --async")
    if not os.environ.get("EQ_API_KEY", "").strip():
        parser.error("set EQ_API_KEY to your API key (eq_live_... or eq_test_...)")
    return args


def main(argv=None):
    try:
        args = parse_arguments(argv)
    except UsageError as e:
        return usage_error(e)
    api_key = os.environ["EQ_API_KEY"].strip()
    client = Client(os.environ.get("EQ_API_URL", "http://127.0.0.1:8080"), api_key,
                    max(args.retries, 0), max(args.max_wait, 0))
    try:
        data = args.run(client, args)
    except ApiError as e:
        status = e.status
        print(json.dumps({
            "ok": False, "status": status, "code": e.envelope.get("code", status),
            "msg": e.envelope.get("msg", ""), "request_id": e.request_id,
            "retryable": status in RETRYABLE or status == 500, "retry_after": e.retry_after,
            "hint": HINTS.get(status, "unexpected status"),
        }, ensure_ascii=False))
        return 1
    except Unreachable as e:
        print(json.dumps({"ok": False, "status": None, "msg": str(e), "retryable": True,
                          "hint": "check EQ_API_URL and that the service is running"}))
        return 3
    print(json.dumps({"ok": True, "data": data}, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
