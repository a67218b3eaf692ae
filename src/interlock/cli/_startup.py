"""Starting a long-running command: its socket, its start-up failures, its banner.

``interlock serve`` and ``interlock worker`` say they are serving only once they are: the
listening socket is bound before anything else (a taken port is refused at once), and a store
that cannot be reached ends the command with one line saying what is wrong and what to do, as
the short commands do, instead of a traceback after a banner.
"""

from __future__ import annotations

import errno
import logging
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from .._errors import InterlockError
from ._output import Refused

__all__ = ["Startup", "check_free", "listen", "one_line", "refusal", "where"]

_Message = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[_Message]]
_Send = Callable[[_Message], Awaitable[None]]
_ASGIApp = Callable[[_Message, _Receive, _Send], Awaitable[None]]


def one_line(text: str) -> str:
    """``text`` on one line (a driver's message may hold line breaks and tabs)."""
    return " ".join(text.split())


def refusal(exc: BaseException) -> Refused | None:
    """The one-line refusal for a start-up failure interlock can explain, or None (a bug).

    An exception group (a task group's) is searched for the interlock error in it.
    """
    found = _interlock_error(exc)
    return None if found is None else Refused(one_line(str(found)))


def _interlock_error(exc: BaseException) -> InterlockError | None:
    if isinstance(exc, InterlockError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _interlock_error(inner)
            if found is not None:
                return found
    return None


def where(host: str, port: int) -> str:
    """``host:port`` as a URL writes it (an IPv6 address in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def listen(host: str, port: int, *, option: str = "--port") -> socket.socket:
    """A TCP socket bound to ``host:port`` (0: a free port), for a server to listen on.

    Raises:
        Refused: The port is taken, or this machine cannot listen there.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise Refused(
            f"cannot listen on {where(host, port)}: {exc.strerror}; pass an address of this "
            "machine with --host (127.0.0.1 for this machine only, 0.0.0.0 for every interface)"
        ) from exc
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        # As uvicorn and http.server do: a port left in TIME_WAIT by a server that just
        # stopped is free to take again; one that something listens on is not.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise _cannot_listen(host, port, exc, option) from exc
    return sock


def check_free(host: str, port: int, *, option: str) -> None:
    """Refuse now if ``host:port`` cannot be listened on (a server binds it later itself).

    Raises:
        Refused: The port is taken, or this machine cannot listen there.
    """
    listen(host, port, option=option).close()


def _cannot_listen(host: str, port: int, exc: OSError, option: str) -> Refused:
    if exc.errno == errno.EADDRINUSE:
        return Refused(
            f"cannot listen on {where(host, port)}: the port is taken by another program (or "
            f"another interlock); stop it, or pass another {option} (0 picks a free one)"
        )
    if exc.errno == errno.EACCES:
        return Refused(
            f"cannot listen on {where(host, port)}: permission denied (ports below 1024 need "
            f"privileges); pass a port of 1024 or more with {option}"
        )
    return Refused(
        f"cannot listen on {where(host, port)}: {exc.strerror or exc}; pass an address of this "
        f"machine with --host and a free port with {option}"
    )


class Startup:
    """An ASGI app whose start-up is watched: a failure is kept for the command to report.

    The served app's lifespan runs as usual. If its start-up fails, the exception is kept in
    `error` instead of being logged as a traceback by the server, and `log_filter` holds back
    the server's own start-up lines until `serving` is set: the command then prints either its
    banner or one line saying what went wrong.
    """

    def __init__(self, app: _ASGIApp) -> None:
        self.app = app
        self.error: BaseException | None = None
        """The exception the app's start-up raised, if it failed."""
        self.serving = False
        """Set by the command once the server listens."""

    async def __call__(self, scope: _Message, receive: _Receive, send: _Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def keep_quiet(message: _Message) -> None:
            if message["type"] == "lifespan.startup.failed":
                message = {**message, "message": ""}  # the traceback: reported by the command
            await send(message)

        try:
            await self.app(scope, receive, keep_quiet)
        except BaseException as exc:
            if self.serving:
                raise
            self.error = exc

    def log_filter(self, record: logging.LogRecord) -> bool:
        """Pass a server log record: all once serving; before, errors not already kept."""
        return self.serving or (record.levelno >= logging.ERROR and self.error is None)
