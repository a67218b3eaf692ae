"""Webhook receivers on loopback for the notification tests: real HTTP, scripted answers.

`Receiver` serves ``POST /hook`` (Starlette under uvicorn, in a background thread), records
each request it gets and answers it with the next scripted `Answer`: a status and headers,
or no answer at all until the test ends (to play a receiver that hangs). `serve` runs any
ASGI app the same way.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial

import anyio.to_thread
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp

__all__ = ["Answer", "Received", "Receiver", "closed_port", "serve"]


@dataclass(frozen=True, kw_only=True)
class Answer:
    """How the receiver answers one request."""

    status: int = 200
    """The HTTP status."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Extra response headers."""
    body: bytes = b""
    """The response body."""
    hang: bool = False
    """Give no answer until the receiver stops (at the end of the test)."""


@dataclass(frozen=True, kw_only=True)
class Received:
    """One request the receiver got."""

    body: bytes
    """The raw body."""
    headers: dict[str, str]
    """The request headers (lower-case names)."""
    at: float
    """When it arrived (`time.monotonic`)."""


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@contextmanager
def serve(app: ASGIApp) -> Iterator[int]:
    """Serve ``app`` on a loopback port (yielded) until the block ends."""
    # Bound and listening before the server runs: a client may connect at once, the kernel
    # queues the connection until uvicorn accepts it.
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join()
        sock.close()


class Receiver:
    """A webhook receiver on loopback; use it as a context manager.

    Args:
        answers: The answers to the first requests, in order.
        then: The answer to every request after those.
    """

    def __init__(self, *answers: Answer, then: Answer = Answer()) -> None:
        self.requests: list[Received] = []
        """Every request received, in order."""
        self._answers = deque(answers)
        self._then = then
        self._arrived = threading.Condition()
        self._release = threading.Event()
        self._serving = serve(Starlette(routes=[Route("/hook", self._hook, methods=["POST"])]))
        self.url = ""
        """The URL to point a webhook at."""

    def __enter__(self) -> Receiver:
        self.url = f"http://127.0.0.1:{self._serving.__enter__()}/hook"
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._release.set()
        self._serving.__exit__(None, None, None)

    async def wait_requests(self, count: int) -> list[Received]:
        """Wait until ``count`` requests have arrived (10 s at most); return them all."""

        def wait() -> bool:
            with self._arrived:
                return self._arrived.wait_for(lambda: len(self.requests) >= count, 10.0)

        if not await anyio.to_thread.run_sync(wait, abandon_on_cancel=True):
            raise AssertionError(f"{len(self.requests)} requests arrived, not {count}")
        return list(self.requests)

    async def _hook(self, request: Request) -> Response:
        body = await request.body()
        with self._arrived:
            self.requests.append(
                Received(body=body, headers=dict(request.headers), at=time.monotonic())
            )
            answer = self._answers.popleft() if self._answers else self._then
            self._arrived.notify_all()
        if answer.hang:
            await anyio.to_thread.run_sync(partial(self._release.wait))
            return Response(status_code=504)
        return Response(answer.body, status_code=answer.status, headers=dict(answer.headers))
