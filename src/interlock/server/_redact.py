"""Bearer tokens kept out of the access log.

The server takes a token only from the ``Authorization`` header, never from a URL. A client
may still put one in a query string (an ``EventSource``, which cannot send headers, given
``?access_token=...``); the request is refused, but uvicorn's access log prints the path with
its query string, and a log outlives the token's secrecy. While the server runs, a filter on
the ``uvicorn.access`` logger masks, in every logged path, the value of a parameter named like
a credential (`SECRET_NAMES`) and any value the server would accept as a token, and the path
segment after one of `SECRET_SEGMENTS` (an e-mail link's token: ``/links/<token>``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final
from urllib.parse import unquote_plus

__all__ = ["ACCESS_LOGGER", "REDACTED", "SECRET_NAMES", "SECRET_SEGMENTS", "RedactTokens"]

ACCESS_LOGGER: Final = "uvicorn.access"
"""The logger uvicorn (and gunicorn's uvicorn workers) write one line per request to."""
REDACTED: Final = "[redacted]"
SECRET_NAMES: Final = frozenset(
    {
        "access_token",
        "api_key",
        "apikey",
        "auth",
        "authorization",
        "bearer",
        "id_token",
        "password",
        "refresh_token",
        "secret",
        "token",
    }
)
"""Query parameters whose value is masked whatever it is (compared in lower case)."""
SECRET_SEGMENTS: Final = frozenset({"links"})
"""Path segments whose next segment is a credential (``/links/<token>``), masked."""


class RedactTokens(logging.Filter):
    """Masks credentials in the query strings of access-log records.

    Args:
        is_token: Whether a value is a token the server knows (masked under any name).
    """

    def __init__(self, is_token: Callable[[str], object]) -> None:
        super().__init__(ACCESS_LOGGER)
        self._is_token = is_token

    def filter(self, record: logging.LogRecord) -> bool:
        # uvicorn logs '%s - "%s %s HTTP/%s" %d' with the path and query as one argument.
        if isinstance(record.args, tuple) and any(_secretive(a) for a in record.args):
            record.args = tuple(
                self.redact(a) if isinstance(a, str) and _secretive(a) else a for a in record.args
            )
        return True

    def redact(self, target: str) -> str:
        """``target`` (a path and its query string) with credentials masked."""
        path, mark, query = target.partition("?")
        path = _mask_segments(path)
        if not mark:
            return path
        parts = []
        for pair in query.split("&"):
            name, eq, value = pair.partition("=")
            secret = unquote_plus(name).strip().lower() in SECRET_NAMES
            if eq and value and (secret or self._known(value)):
                pair = f"{name}={REDACTED}"
            elif not eq and self._known(name):
                pair = REDACTED
            parts.append(pair)
        return f"{path}?{'&'.join(parts)}"

    def _known(self, raw: str) -> bool:
        text = unquote_plus(raw).strip()
        if text.lower().startswith("bearer "):
            return True
        try:
            return bool(text) and bool(self._is_token(text))
        except Exception:
            # A logging filter must not fail the request it logs; mask what it cannot judge.
            return True


def _secretive(arg: object) -> bool:
    """Whether a log argument is a request target that may hold a credential."""
    if not isinstance(arg, str):
        return False
    return "?" in arg or any(f"/{name}/" in arg for name in SECRET_SEGMENTS)


def _mask_segments(path: str) -> str:
    """``path`` with the segment after each of `SECRET_SEGMENTS` masked."""
    parts = path.split("/")
    for i in range(len(parts) - 1):
        if parts[i] in SECRET_SEGMENTS and parts[i + 1]:
            parts[i + 1] = REDACTED
    return "/".join(parts)
