"""Signing webhook bodies, and checking a signature on the receiving side.

The scheme: ``Interlock-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "t.body">`` (see
docs/notifications.md for receivers in other languages).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Literal

from .._errors import InterlockError

__all__ = ["SignatureError", "sign", "verify_signature"]

# --- signatures ------------------------------------------------------------------------------


class SignatureError(InterlockError):
    """Raised when a webhook's signature header is malformed, does not match, or is too old.

    Attributes:
        reason: ``malformed``, ``mismatch`` or ``expired``.
    """

    def __init__(self, message: str, *, reason: Literal["malformed", "mismatch", "expired"]):
        super().__init__(message)
        self.reason = reason


def _digest(secret: str | bytes, timestamp: int, body: bytes) -> str:
    key = secret.encode() if isinstance(secret, str) else secret
    return hmac.new(key, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def sign(secret: str | bytes, body: bytes, *, timestamp: int | None = None) -> str:
    """Return the ``Interlock-Signature`` header value for ``body``: ``t=<unix s>,v1=<hex>``.

    ``v1`` is the hex HMAC-SHA256, keyed with ``secret``, of the timestamp, a dot, and the
    body's bytes exactly as sent.
    """
    t = int(time.time()) if timestamp is None else int(timestamp)
    return f"t={t},v1={_digest(secret, t, body)}"


def verify_signature(
    secret: str | bytes,
    body: bytes,
    header: str | None,
    *,
    tolerance: float = 300,
    now: float | None = None,
) -> None:
    """Check that a webhook request was signed with ``secret`` less than ``tolerance`` s ago.

    Pass the raw request body (before any JSON parsing) and the ``Interlock-Signature``
    header, or None when the request has none. Any of several ``v1`` values may match (a
    sender may sign with an old and a new secret while rotating); unknown keys are ignored.

    Raises:
        SignatureError: The header is missing or malformed, no signature matches, or its
            timestamp is further than ``tolerance`` seconds from ``now`` (a replayed request).
    """
    if not isinstance(body, bytes | bytearray | memoryview):
        raise TypeError(f"body must be the raw request bytes, not {type(body).__name__}")
    if not tolerance >= 0:
        raise ValueError(f"tolerance must be 0 or more seconds, not {tolerance!r}")
    if header is None:
        raise SignatureError(
            "the request has no Interlock-Signature header: it was not sent by an interlock "
            "webhook",
            reason="malformed",
        )
    timestamp: int | None = None
    signatures: list[str] = []
    for part in header.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep:
            continue
        if key == "t":
            try:
                timestamp = int(value)
            except ValueError:
                timestamp = None
        elif key == "v1":
            signatures.append(value)
    if timestamp is None or not signatures:
        raise SignatureError(
            f"the signature header {header[:80]!r} is not of the form 't=<unix seconds>,"
            "v1=<hex>'; pass the Interlock-Signature header as received",
            reason="malformed",
        )
    expected = _digest(secret, timestamp, bytes(body))
    if not any(hmac.compare_digest(expected, s) for s in signatures):
        raise SignatureError(
            "the signature does not match the body: the body was changed, or the secret is "
            "not the one the webhook was configured with",
            reason="mismatch",
        )
    age = (time.time() if now is None else now) - timestamp
    if abs(age) > tolerance:
        raise SignatureError(
            f"the signature was made {age:.0f} s from now, beyond the tolerance of "
            f"{tolerance:g} s: a replayed request, or a clock out of sync",
            reason="expired",
        )
