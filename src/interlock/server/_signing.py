"""Signing webhook bodies: the Standard Webhooks headers, and the deprecated older scheme.

Every webhook request is signed per the Standard Webhooks specification
(https://www.standardwebhooks.com/), with its ``standardwebhooks`` package:

- ``webhook-id``: the event's id, the same on every attempt;
- ``webhook-timestamp``: the attempt's Unix time in whole seconds;
- ``webhook-signature``: ``v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">``.

The HMAC key is the secret's bytes: a ``whsec_<base64>`` secret (the specification's form)
is the bytes its base64 decodes to; any other string is its own UTF-8 bytes, and bytes are
taken as they are (decision 74).

Until 0.3.0 each request also carries the older ``Interlock-Signature: t=<unix seconds>,
v1=<hex HMAC-SHA256 of "t.body">``, keyed with the secret as given (its UTF-8 bytes), which
`verify_signature` checks; both are deprecated.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
import warnings
from datetime import UTC, datetime
from typing import Literal

from .._errors import InterlockError

try:
    import standardwebhooks
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "webhook signatures need standardwebhooks: pip install 'interlock[server]'"
    ) from exc

__all__ = ["SignatureError", "sign", "verify_signature"]

SECRET_PREFIX = "whsec_"
"""The prefix of a secret in the Standard Webhooks form: ``whsec_`` and the key in base64."""

_REMOVAL = "0.3.0"
"""The release without the ``Interlock-Signature`` header, `sign` and `verify_signature`."""


# --- Standard Webhooks -----------------------------------------------------------------------


def signing_key(secret: str | bytes) -> bytes:
    """The HMAC key of a webhook secret: a ``whsec_`` secret decoded, else its own bytes.

    Raises:
        ValueError: The secret is empty, or starts with ``whsec_`` and what follows is not
            base64 of at least one byte.
    """
    if isinstance(secret, bytes):
        key = secret
    elif secret.startswith(SECRET_PREFIX):
        encoded = secret[len(SECRET_PREFIX) :]
        try:
            # Padding is optional in the form some providers print; strict otherwise.
            key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError(
                "a webhook secret starting with 'whsec_' must be followed by the key in base64 "
                "(e.g. 'whsec_' + base64 of 32 random bytes); this one is not valid base64"
            ) from exc
    else:
        key = secret.encode()
    if not key:
        raise ValueError(
            "a webhook needs a non-empty secret to sign its requests with; share it with the "
            "receiver, which checks the webhook-signature header with it"
        )
    return key


def standard_headers(
    key: bytes, event_id: str, body: bytes, *, timestamp: int | None = None
) -> dict[str, str]:
    """The ``webhook-id``, ``webhook-timestamp`` and ``webhook-signature`` headers of a body."""
    t = int(time.time()) if timestamp is None else int(timestamp)
    signature = standardwebhooks.Webhook(key).sign(
        msg_id=event_id,
        timestamp=datetime.fromtimestamp(t, UTC),
        # The bodies are JSON from msgspec, UTF-8; the package signs text, encoded back as is.
        data=body.decode("utf-8"),
    )
    return {"webhook-id": event_id, "webhook-timestamp": str(t), "webhook-signature": signature}


# --- the deprecated Interlock-Signature ------------------------------------------------------


class SignatureError(InterlockError):
    """Raised when a webhook's ``Interlock-Signature`` is malformed, does not match, or is too old.

    Attributes:
        reason: ``malformed``, ``mismatch`` or ``expired``.
    """

    def __init__(self, message: str, *, reason: Literal["malformed", "mismatch", "expired"]):
        super().__init__(message)
        self.reason = reason


def _digest(secret: str | bytes, timestamp: int, body: bytes) -> str:
    key = secret.encode() if isinstance(secret, str) else secret
    return hmac.new(key, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def legacy_header(secret: str | bytes, body: bytes, *, timestamp: int | None = None) -> str:
    """The deprecated ``Interlock-Signature`` header value for ``body``, without a warning."""
    t = int(time.time()) if timestamp is None else int(timestamp)
    return f"t={t},v1={_digest(secret, t, body)}"


def _deprecated(name: str) -> None:
    warnings.warn(
        f"{name}() and the Interlock-Signature header are deprecated and go in {_REMOVAL}: "
        "verify the webhook-signature header with standardwebhooks.Webhook(secret).verify(body, "
        "headers) instead (see docs/notifications.md)",
        DeprecationWarning,
        stacklevel=3,
    )


def sign(secret: str | bytes, body: bytes, *, timestamp: int | None = None) -> str:
    """Return the deprecated ``Interlock-Signature`` header value for ``body``.

    The value is ``t=<unix s>,v1=<hex>``, where ``v1`` is the hex HMAC-SHA256, keyed with
    ``secret`` (its UTF-8 bytes when a string), of the timestamp, a dot, and the body's bytes
    exactly as sent. Deprecated: it goes in 0.3.0 with the header.

    Args:
        secret: The webhook's secret, as the webhook was given it.
        body: The request body.
        timestamp: The Unix time to sign at; now when None.
    """
    _deprecated("sign")
    return legacy_header(secret, body, timestamp=timestamp)


def verify_signature(
    secret: str | bytes,
    body: bytes,
    header: str | None,
    *,
    tolerance: float = 300,
    now: float | None = None,
) -> None:
    """Check that an ``Interlock-Signature`` was made with ``secret`` within ``tolerance`` s.

    Deprecated: it goes in 0.3.0 with the header; verify the Standard Webhooks headers
    instead. Pass the raw request body (before any JSON parsing) and the
    ``Interlock-Signature`` header, or None when the request has none. Any of several ``v1``
    values may match (a sender may sign with an old and a new secret while rotating);
    unknown keys are ignored.

    Args:
        secret: The webhook's secret, as the webhook was given it.
        body: The raw request body.
        header: The ``Interlock-Signature`` header, or None.
        tolerance: How far the signature's time may be from ``now``, in seconds.
        now: The receiver's Unix time; the clock's when None.

    Raises:
        SignatureError: The header is missing or malformed, no signature matches, or its
            timestamp is further than ``tolerance`` seconds from ``now`` (a replayed request).
    """
    _deprecated("verify_signature")
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
