"""The API's records as dataclasses, read from the envelope's data.

Fields the service adds later are ignored, so an older client keeps working
against a newer service; times stay the ISO 8601 strings the service sends.
"""

from dataclasses import dataclass
from typing import Any, List, Mapping, Optional


def _get(data: Mapping[str, Any], name: str, kind: str) -> Any:
    if not isinstance(data, Mapping) or name not in data:
        raise ValueError(f"{kind}: the service's answer has no {name!r}")
    return data[name]


def _optional(data: Mapping[str, Any], name: str) -> Any:
    return data.get(name)


@dataclass(frozen=True)
class Reply:
    text: str
    score: float
    eq_analysis: str

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Reply":
        return cls(text=_get(d, "text", "reply"), score=float(_get(d, "score", "reply")),
                   eq_analysis=_get(d, "eq_analysis", "reply"))


@dataclass(frozen=True)
class ReplyResult:
    """The replies of POST /api/v1/reply, and of a task that succeeded."""
    replies: List[Reply]
    request_id: str
    mode: str
    tokens_used: int

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ReplyResult":
        return cls(replies=[Reply.from_dict(r) for r in _get(d, "replies", "reply result")],
                   request_id=_get(d, "request_id", "reply result"),
                   mode=_get(d, "mode", "reply result"),
                   tokens_used=_get(d, "tokens_used", "reply result"))


@dataclass(frozen=True)
class Analysis:
    """POST /api/v1/analyze."""
    emotion: str
    intensity: float
    underlying_need: str
    relationship_stage: str
    suggested_strategy: str

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Analysis":
        return cls(emotion=_get(d, "emotion", "analysis"),
                   intensity=float(_get(d, "intensity", "analysis")),
                   underlying_need=_get(d, "underlying_need", "analysis"),
                   relationship_stage=_get(d, "relationship_stage", "analysis"),
                   suggested_strategy=_get(d, "suggested_strategy", "analysis"))


@dataclass(frozen=True)
class ModeUnits:
    """Remaining units per mode."""
    standard: int
    fast: int
    perfect: int

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ModeUnits":
        return cls(standard=_get(d, "standard", "quota"), fast=_get(d, "fast", "quota"),
                   perfect=_get(d, "perfect", "quota"))


@dataclass(frozen=True)
class MonthlyVolume:
    """The account's use of its monthly volume over all modes (issue 26)."""
    limit: Optional[int]  # None: no monthly limit
    used: int
    resets_at: str  # ISO 8601 UTC, the first instant of next month

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "MonthlyVolume":
        return cls(limit=_get(d, "limit", "monthly volume"), used=_get(d, "used", "monthly volume"),
                   resets_at=_get(d, "resets_at", "monthly volume"))


@dataclass(frozen=True)
class Quota:
    """GET /api/v1/quota."""
    quota: ModeUnits
    expire_at: str
    tier: str
    #: None from a service that does not report the month's volume yet.
    monthly: Optional[MonthlyVolume] = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Quota":
        monthly = _optional(d, "monthly")
        return cls(quota=ModeUnits.from_dict(_get(d, "quota", "quota")),
                   expire_at=_get(d, "expire_at", "quota"), tier=_get(d, "tier", "quota"),
                   monthly=MonthlyVolume.from_dict(monthly) if monthly is not None else None)


@dataclass(frozen=True)
class TaskCreated:
    """POST /api/v1/reply/async, and how to repeat that call safely."""
    task_id: str
    status: str
    #: The Idempotency-Key sent: the caller's, or the one made for the call.
    idempotency_key: str
    #: True when the service answered with the stored first answer to this key.
    replayed: bool


@dataclass(frozen=True)
class TaskError:
    code: int
    msg: str

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TaskError":
        return cls(code=_get(d, "code", "task error"), msg=_get(d, "msg", "task error"))


@dataclass(frozen=True)
class TaskWebhook:
    url: str
    status: str  # none | pending | delivered | failed
    attempts: int
    last_attempt_at: Optional[str]
    last_status: Optional[int]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TaskWebhook":
        return cls(url=_get(d, "url", "task webhook"), status=_get(d, "status", "task webhook"),
                   attempts=_get(d, "attempts", "task webhook"),
                   last_attempt_at=_optional(d, "last_attempt_at"),
                   last_status=_optional(d, "last_status"))


@dataclass(frozen=True)
class Task:
    """GET /api/v1/task/{task_id}."""
    task_id: str
    status: str  # queued | running | succeeded | failed
    mode: str
    created_at: str
    started_at: Optional[str]
    finished_at: Optional[str]
    result: Optional[ReplyResult]
    error: Optional[TaskError]
    webhook: Optional[TaskWebhook]

    @property
    def finished(self) -> bool:
        return self.status in ("succeeded", "failed")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Task":
        result, error, webhook = (_optional(d, k) for k in ("result", "error", "webhook"))
        return cls(task_id=_get(d, "task_id", "task"), status=_get(d, "status", "task"),
                   mode=_get(d, "mode", "task"), created_at=_get(d, "created_at", "task"),
                   started_at=_optional(d, "started_at"), finished_at=_optional(d, "finished_at"),
                   result=ReplyResult.from_dict(result) if result is not None else None,
                   error=TaskError.from_dict(error) if error is not None else None,
                   webhook=TaskWebhook.from_dict(webhook) if webhook is not None else None)
