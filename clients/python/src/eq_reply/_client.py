"""The HTTP client: one service, one API key."""

import email.utils
import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional

from ._errors import EqReplyError, TaskWaitTimeout
from ._records import Analysis, Quota, ReplyResult, Task, TaskCreated


@dataclass(frozen=True)
class HttpResponse:
    """What a transport returns; header names in lower case."""
    status: int
    headers: Mapping[str, str]
    body: bytes


#: transport(method, url, headers, body, timeout) -> HttpResponse. The default
#: is urllib's; pass another for a custom HTTP stack, logging or tests.
Transport = Callable[[str, str, Dict[str, str], Optional[bytes], float], HttpResponse]

_RETRIED_STATUSES = (429, 503)
# A 503 always carries Retry-After (docs/contract.md §2); a proxy's may not.
_DEFAULT_RETRY_WAIT_S = 1.0
_IDEMPOTENCY_KEY = re.compile(r"[\x20-\x7e]{1,255}")


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """The API never redirects; following one would carry the key elsewhere."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_opener = urllib.request.build_opener(_NoRedirects)


def urllib_transport(method: str, url: str, headers: Dict[str, str],
                     body: Optional[bytes], timeout: float) -> HttpResponse:
    request = urllib.request.Request(url, data=body, headers=headers, method=method)
    try:
        with _opener.open(request, timeout=timeout) as response:
            return HttpResponse(response.status, _lower(response.headers), response.read())
    except urllib.error.HTTPError as error:  # any status but 2xx: still an answer
        with error:
            return HttpResponse(error.code, _lower(error.headers), error.read())


def _lower(headers) -> Dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


class Client:
    """A client of one EQ Reply service with one API key.

    A 429 or 503 is tried again after its Retry-After, at most ``max_retries``
    times, while the waits of one call add up to at most ``max_retry_wait``
    seconds (a retry whose wait would go past it is not made: the error is
    raised at once). ``timeout`` bounds each HTTP exchange; its default, 190 s,
    is above the service's own deadline for the slowest sync mode (perfect,
    180 s), so the service's 504 arrives first.
    """

    def __init__(self, base_url: str, api_key: str, *, max_retries: int = 3,
                 max_retry_wait: float = 60.0, timeout: float = 190.0,
                 transport: Optional[Transport] = None):
        self.base_url = _check_base_url(base_url)
        if not isinstance(api_key, str) or not api_key.strip():
            raise ValueError("api_key must be a non-empty string (a key from eqctl key create)")
        self._api_key = api_key
        if not isinstance(max_retries, int) or isinstance(max_retries, bool) or max_retries < 0:
            raise ValueError(f"max_retries must be a whole number from 0, got {max_retries!r}")
        self.max_retries = max_retries
        self.max_retry_wait = _non_negative("max_retry_wait", max_retry_wait)
        self.timeout = _non_negative("timeout", timeout)
        if self.timeout == 0:
            raise ValueError("timeout must be above 0 seconds")
        self._transport = transport or urllib_transport

    def reply(self, mode: str, message: str, *, context: Optional[str] = None,
              scene: Optional[str] = None, reply_count: Optional[int] = None,
              idempotency_key: Optional[str] = None) -> ReplyResult:
        """POST /api/v1/reply: replies generated now (charges one unit of the mode)."""
        headers = {}
        if idempotency_key is not None:
            headers["Idempotency-Key"] = _check_idempotency_key(idempotency_key)
        body = _without_none(mode=mode, message=message, context=context, scene=scene,
                             reply_count=reply_count)
        data, _ = self._call("POST", "/api/v1/reply", body, headers)
        return ReplyResult.from_dict(data)

    def reply_async(self, mode: str, message: str, *, context: Optional[str] = None,
                    scene: Optional[str] = None, reply_count: Optional[int] = None,
                    webhook_url: Optional[str] = None,
                    idempotency_key: Optional[str] = None) -> TaskCreated:
        """POST /api/v1/reply/async: a task, answered once its job is queued.

        Always sent with an Idempotency-Key: the caller's, or one made here
        for this call, used for each of its retries and returned as
        ``idempotency_key``, so repeating the call with it cannot make a
        second task."""
        key = (_check_idempotency_key(idempotency_key) if idempotency_key is not None
               else str(uuid.uuid4()))
        body = _without_none(mode=mode, message=message, context=context, scene=scene,
                             reply_count=reply_count, webhook_url=webhook_url)
        data, headers = self._call("POST", "/api/v1/reply/async", body, {"Idempotency-Key": key})
        return TaskCreated(task_id=_field(data, "task_id"), status=_field(data, "status"),
                           idempotency_key=key,
                           replayed=headers.get("idempotent-replayed") == "true")

    def analyze(self, message: str, *, context: Optional[str] = None) -> Analysis:
        """POST /api/v1/analyze: the message's emotion and intent (charges nothing)."""
        data, _ = self._call("POST", "/api/v1/analyze",
                             _without_none(message=message, context=context), {})
        return Analysis.from_dict(data)

    def quota(self) -> Quota:
        """GET /api/v1/quota: remaining units per mode, their expiry and tier."""
        data, _ = self._call("GET", "/api/v1/quota", None, {})
        return Quota.from_dict(data)

    def task(self, task_id: str) -> Task:
        """GET /api/v1/task/{task_id}: the task's state, its result once it succeeded."""
        if not isinstance(task_id, str) or not task_id:
            raise ValueError("task_id must be the task_id reply_async returned")
        data, _ = self._call("GET", "/api/v1/task/" + urllib.parse.quote(task_id, safe=""), None, {})
        return Task.from_dict(data)

    def wait_for_task(self, task_id: str, *, interval: float = 1.0,
                      timeout: float = 120.0) -> Task:
        """Polls a task until it has succeeded or failed and returns it (a
        failed task too, with its ``error``). Each poll counts against the
        key's rate limit. Raises TaskWaitTimeout when it has not ended within
        ``timeout`` seconds."""
        interval = _non_negative("interval", interval)
        timeout = _non_negative("timeout", timeout)
        deadline = time.monotonic() + timeout
        while True:
            task = self.task(task_id)
            if task.finished:
                return task
            if time.monotonic() + interval > deadline:
                raise TaskWaitTimeout(task_id, task.status, timeout)
            time.sleep(interval)

    def _call(self, method: str, path: str, body: Optional[Dict[str, Any]],
              extra_headers: Dict[str, str]):
        """One call with its retries; the same headers (so the same
        Idempotency-Key) go with every attempt. Returns (data, headers)."""
        headers = {"Accept": "application/json",
                   "Authorization": f"Bearer {self._api_key}", **extra_headers}
        payload = None
        if body is not None:
            payload = json.dumps(body, ensure_ascii=False).encode("utf-8")
            headers["Content-Type"] = "application/json; charset=utf-8"
        waited = 0.0
        retry = 0
        while True:
            response = self._transport(method, self.base_url + path, dict(headers), payload,
                                       self.timeout)
            envelope = _parse_envelope(response.body)
            if 200 <= response.status < 300 and envelope is not None and envelope["code"] == 0:
                return envelope.get("data"), response.headers
            error = _to_error(response, envelope)
            if response.status not in _RETRIED_STATUSES or retry >= self.max_retries:
                raise error
            wait = float(error.retry_after) if error.retry_after is not None else _DEFAULT_RETRY_WAIT_S
            if waited + wait > self.max_retry_wait:
                raise error
            time.sleep(wait)
            waited += wait
            retry += 1


def _parse_envelope(body: bytes) -> Optional[Dict[str, Any]]:
    try:
        value = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if (not isinstance(value, dict) or not isinstance(value.get("code"), int)
            or not isinstance(value.get("msg"), str)):
        return None
    return value


def _to_error(response: HttpResponse, envelope: Optional[Dict[str, Any]]) -> EqReplyError:
    request_id = response.headers.get("x-request-id")
    retry_after = _parse_retry_after(response.headers.get("retry-after"))
    if envelope is None:  # not the service's envelope: a proxy's or load balancer's page
        return EqReplyError(response.status,
                            f"HTTP {response.status} without the service's JSON envelope",
                            response.status, request_id, retry_after)
    msg = envelope["msg"]
    if 200 <= response.status < 300:
        msg = f"HTTP {response.status} with code {envelope['code']}: {msg}"
    return EqReplyError(envelope["code"], msg, response.status, request_id, retry_after)


def _parse_retry_after(value: Optional[str]) -> Optional[int]:
    """Retry-After as seconds: a number of seconds, or an HTTP date (RFC 9110)."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return int(value)
    try:
        at = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if at is None or at.tzinfo is None:
        return None
    return max(0, int(at.timestamp() - time.time() + 0.999))


def _field(data: Any, name: str) -> Any:
    if not isinstance(data, dict) or name not in data:
        raise ValueError(f"the service's answer has no {name!r}")
    return data[name]


def _without_none(**fields: Any) -> Dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def _check_base_url(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("base_url must be the service's URL, e.g. http://127.0.0.1:8080")
    parts = urllib.parse.urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"base_url {value!r} is not an absolute http(s) URL")
    if parts.query or parts.fragment:
        raise ValueError("base_url must not carry a query or fragment")
    return value.rstrip("/")


def _check_idempotency_key(key: Any) -> str:
    if not isinstance(key, str) or not _IDEMPOTENCY_KEY.fullmatch(key):
        raise ValueError("idempotency_key must be 1 to 255 printable ASCII characters")
    return key


def _non_negative(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"{name} must be a number of seconds from 0, got {value!r}")
    return float(value)
