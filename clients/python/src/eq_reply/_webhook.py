"""Verification of EQ Reply's webhook requests (docs/contract.md §6)."""

import base64
import binascii
import hashlib
import hmac
import json
import re
import time
from typing import Any, Dict, Mapping, Optional, Sequence, Union

from ._errors import WebhookVerificationError

_PREFIX = "whsec_"
_SERVICE_SIGNATURE = re.compile(r"sha256=([0-9a-fA-F]{64})")
DEFAULT_TOLERANCE_SECONDS = 300


def verify_webhook(body: Union[bytes, str], headers: Mapping[str, str],
                   secret: Union[str, Sequence[str]], *,
                   tolerance_seconds: float = DEFAULT_TOLERANCE_SECONDS,
                   now: Optional[float] = None) -> Dict[str, Any]:
    """Checks a webhook request and returns its parsed body.

    Either signature scheme the service sends is enough:

    - Standard Webhooks: ``webhook-signature: v1,<base64>`` over
      ``<webhook-id>.<webhook-timestamp>.<body>``, keyed with the
      base64-decoded part of the secret after ``whsec_``; the timestamp is
      ``webhook-timestamp``.
    - ``X-Service-Signature: sha256=<hex>`` over the body, keyed with the
      secret as printed (``whsec_`` included); the timestamp is the body's
      ``timestamp``.

    ``body`` is the raw body exactly as received. ``headers`` is any mapping
    (an ``http.server`` handler's ``self.headers``, a dict in any case).
    ``secret`` may be a list: during a rotation, the new and the previous
    one. The signed timestamp must be within ``tolerance_seconds`` of now
    (default 300): the service signs each attempt afresh, so a retry hours
    later passes and a captured request replayed later does not. Signatures
    are compared with ``hmac.compare_digest``. Raises
    WebhookVerificationError otherwise.
    """
    raw = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    secrets = _check_secrets(secret)
    if isinstance(tolerance_seconds, bool) or not isinstance(tolerance_seconds, (int, float)) \
            or not tolerance_seconds >= 0:
        raise ValueError("tolerance_seconds must be a number from 0")
    now = time.time() if now is None else now

    standard = _header(headers, "webhook-signature")
    service = _header(headers, "x-service-signature")
    if standard is None and service is None:
        raise WebhookVerificationError(
            "no signature: neither webhook-signature nor X-Service-Signature")
    failures = []
    if standard is not None:
        msg_id = _header(headers, "webhook-id")
        timestamp = _header(headers, "webhook-timestamp")
        if msg_id is None or timestamp is None:
            failures.append("webhook-signature without webhook-id and webhook-timestamp")
        elif _standard_matches(secrets, raw, msg_id, timestamp, standard):
            _check_timestamp(timestamp, "webhook-timestamp", now, tolerance_seconds)
            return _parse(raw)
        else:
            failures.append("webhook-signature does not match")
    if service is not None:
        if _service_matches(secrets, raw, service):
            # This scheme signs the body only: the body's own timestamp is
            # what keeps an old request from being replayed.
            payload = _parse(raw)
            _check_timestamp(payload.get("timestamp"), "the body's timestamp", now,
                             tolerance_seconds)
            return payload
        failures.append("X-Service-Signature does not match")
    raise WebhookVerificationError("; ".join(failures))


def _standard_matches(secrets, raw: bytes, msg_id: str, timestamp: str, header: str) -> bool:
    signed = f"{msg_id}.{timestamp}.".encode("utf-8") + raw
    # Several space-separated entries: during a rotation one per secret.
    signatures = []
    for entry in header.split():
        version, _, value = entry.partition(",")
        if version == "v1" and value:
            signatures.append(value.encode("ascii", "replace"))
    for secret in secrets:
        key = base64.b64decode(secret[len(_PREFIX):])
        expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest())
        for signature in signatures:
            if hmac.compare_digest(expected, signature):
                return True
    return False


def _service_matches(secrets, raw: bytes, header: str) -> bool:
    match = _SERVICE_SIGNATURE.fullmatch(header.strip())
    if not match:
        return False
    given = match.group(1).lower().encode("ascii")
    for secret in secrets:
        expected = hmac.new(secret.encode("utf-8"), raw, hashlib.sha256).hexdigest().encode("ascii")
        if hmac.compare_digest(expected, given):
            return True
    return False


def _check_timestamp(value: Any, what: str, now: float, tolerance: float) -> None:
    if isinstance(value, bool):
        value = None
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if not isinstance(value, int):
        raise WebhookVerificationError(f"{what} is not unix seconds")
    if abs(now - value) > tolerance:
        raise WebhookVerificationError(
            f"{what} is {int(now - value)} s away from now (tolerance {tolerance:g} s): "
            "a stale or replayed request")


def _parse(raw: bytes) -> Dict[str, Any]:
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise WebhookVerificationError("the signed body is not JSON in UTF-8") from None
    if not isinstance(value, dict):
        raise WebhookVerificationError("the signed body is not a JSON object")
    return value


def _check_secrets(secret) -> Sequence[str]:
    secrets = [secret] if isinstance(secret, str) else list(secret)
    if not secrets:
        raise ValueError("secret must be the account's whsec_ secret (or a list of them)")
    for s in secrets:
        if not isinstance(s, str) or not s.startswith(_PREFIX):
            raise ValueError("a secret is whsec_ and base64, as eqctl key create prints it")
        try:
            if not base64.b64decode(s[len(_PREFIX):], validate=True):
                raise ValueError("empty")
        except (binascii.Error, ValueError):
            raise ValueError("a secret is whsec_ and base64, as eqctl key create prints it") from None
    return secrets


def _header(headers: Mapping[str, str], name: str) -> Optional[str]:
    value = headers.get(name)  # email.message.Message (http.server) ignores case itself
    if value is not None:
        return value
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None
