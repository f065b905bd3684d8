"""The exceptions of eq_reply."""

from typing import Optional


class EqReplyError(Exception):
    """An answer of the service other than success: the error envelope
    {code, msg, data: null} of docs/contract.md §2, with the HTTP status and
    the request's X-Request-Id (quote it when reporting a problem)."""

    def __init__(self, code: int, msg: str, status: int,
                 request_id: Optional[str] = None,
                 retry_after: Optional[int] = None):
        where = f" (request {request_id})" if request_id else ""
        super().__init__(f"EQ Reply {status}: {msg}{where}")
        self.code = code
        self.msg = msg
        self.status = status
        self.request_id = request_id
        #: Retry-After in seconds when the answer carried one (429, 503, a 409 in progress).
        self.retry_after = retry_after


class TaskWaitTimeout(Exception):
    """wait_for_task gave up: the task had not ended within its time bound."""

    def __init__(self, task_id: str, last_status: str, timeout: float):
        super().__init__(f"task {task_id} still {last_status} after {timeout:g} s")
        self.task_id = task_id
        self.last_status = last_status


class WebhookVerificationError(Exception):
    """A webhook request that must not be trusted: no valid signature, or a stale one."""
