"""A small OpenAI-compatible chat endpoint on loopback, playing replies a test scripts.

`FakeOpenAI` serves ``POST /v1/chat/completions`` over real HTTP (Starlette under uvicorn,
in a background thread). Each request takes the next scripted reply from the queue a test
fills with `FakeOpenAI.script`, and is recorded in `FakeOpenAI.requests`, so a test asserts
what the client sent as well as what it made of the answer.

A reply is one of:

- `completion(...)`: a non-streamed chat completion (JSON);
- `streamed(...)`: an SSE stream of `chunk(...)` events (and `usage_report(...)`, the
  closing chunk a request with ``stream_options={"include_usage": True}`` gets), ended by
  ``data: [DONE]``;
- `error(...)`: an error status with an OpenAI-shaped error body and chosen headers;
- `raw(...)`: any body at all (to play a broken server);
- `stall()`: no answer until the test ends (to play a server that hangs).
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = [
    "FakeOpenAI",
    "Recorded",
    "Scripted",
    "chunk",
    "closed_port",
    "completion",
    "error",
    "raw",
    "stall",
    "streamed",
    "tool_call",
    "usage",
    "usage_report",
]


@dataclass(frozen=True, kw_only=True)
class Scripted:
    """One reply the fake endpoint will give."""

    status: int = 200
    """The HTTP status."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Extra response headers."""
    body: bytes = b""
    """The whole body, for a non-streamed reply."""
    content_type: str = "application/json"
    """The body's content type."""
    events: Sequence[str] | None = None
    """For a streamed reply: the ``data:`` payload of each SSE event, in order."""
    hang: bool = False
    """Give no answer until the server is released (at the end of the test)."""


@dataclass(frozen=True, kw_only=True)
class Recorded:
    """One request the fake endpoint received."""

    body: dict[str, Any]
    """The JSON body."""
    headers: dict[str, str]
    """The request headers (lower-case names)."""


def tool_call(id: str, name: str, arguments: str) -> dict[str, Any]:
    """A tool call as a non-streamed reply carries it (``arguments`` is the JSON text)."""
    return {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}


def completion(
    content: str | None = None,
    *,
    tool_calls: Sequence[dict[str, Any]] = (),
    model: str = "fake-model",
) -> Scripted:
    """A non-streamed chat completion with one choice."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = list(tool_calls)
    body = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if tool_calls else "stop",
            }
        ],
    }
    return Scripted(body=json.dumps(body).encode())


def chunk(
    *,
    role: str | None = None,
    content: str | None = None,
    tool_calls: Sequence[dict[str, Any]] = (),
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One streamed chunk (a ``chat.completion.chunk`` with one choice's delta).

    ``tool_calls`` are delta pieces: ``{"index": 0, "id": ..., "function": {"name": ...,
    "arguments": "..."}}``, with only the index required. ``usage`` (see `usage`) is sent
    along, as some servers do on the chunk that finishes the reply.
    """
    delta: dict[str, Any] = {}
    if role is not None:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    if tool_calls:
        delta["tool_calls"] = list(tool_calls)
    out: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }
    if usage is not None:
        out["usage"] = usage
    return out


def usage(prompt: int, completion: int, *, cached: int | None = None) -> dict[str, Any]:
    """The ``usage`` object of a completion or chunk: the tokens of the request and reply."""
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached is not None:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    return out


def usage_report(prompt: int, completion: int, *, cached: int | None = None) -> dict[str, Any]:
    """The last chunk of a stream asked for its usage: no choices, only the ``usage``."""
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "fake-model",
        "choices": [],
        "usage": usage(prompt, completion, cached=cached),
    }


def streamed(*chunks: dict[str, Any] | str, done: bool = True) -> Scripted:
    """An SSE stream of chunks; a ``str`` is sent as the event's data verbatim (garbage).

    Without ``done`` the stream just ends, with no ``data: [DONE]``.
    """
    events = [c if isinstance(c, str) else json.dumps(c) for c in chunks]
    if done:
        events.append("[DONE]")
    return Scripted(events=events, content_type="text/event-stream")


def error(
    status: int, message: str = "something failed", *, headers: Mapping[str, str] | None = None
) -> Scripted:
    """An error status with an OpenAI-shaped error body."""
    body = {"error": {"message": message, "type": "fake_error", "param": None, "code": None}}
    return Scripted(status=status, headers=dict(headers or {}), body=json.dumps(body).encode())


def raw(body: bytes, *, status: int = 200, content_type: str = "application/json") -> Scripted:
    """A reply with exactly this body."""
    return Scripted(status=status, body=body, content_type=content_type)


def stall() -> Scripted:
    """A reply that never comes (until the test ends)."""
    return Scripted(hang=True)


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class FakeOpenAI:
    """An OpenAI-compatible endpoint on loopback; use it as a context manager.

    Example:
        >>> with FakeOpenAI() as fake:  # doctest: +SKIP
        ...     fake.script(completion("hello"))
        ...     # point a client at fake.base_url
    """

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        """Every request received, in order."""
        self._replies: deque[Scripted] = deque()
        self._release = threading.Event()
        # Bound and listening before the server runs: a client may connect at once, the
        # kernel queues the connection until uvicorn accepts it.
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(16)
        self.port: int = self._socket.getsockname()[1]
        app = Starlette(routes=[Route("/v1/chat/completions", self._chat, methods=["POST"])])
        config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )

    @property
    def base_url(self) -> str:
        """The endpoint's base URL (what a client takes as ``base_url``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *replies: Scripted) -> None:
        """Queue replies: each request takes the next one."""
        self._replies.extend(replies)

    def reset(self) -> None:
        """Forget the queued replies and the recorded requests, and let stalled replies end."""
        self._release.set()
        self._release = threading.Event()
        self._replies.clear()
        self.requests.clear()

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._release.set()
        self._server.should_exit = True
        self._thread.join()
        self._socket.close()

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(Recorded(body=body, headers=dict(request.headers)))
        if not self._replies:
            return JSONResponse(
                {"error": {"message": "the fake endpoint has no scripted reply left"}},
                status_code=500,
                headers={"x-should-retry": "false"},
            )
        reply = self._replies.popleft()
        if reply.hang:
            await anyio.to_thread.run_sync(self._release.wait)
            return Response(status_code=504)
        if reply.events is None:
            return Response(
                reply.body,
                status_code=reply.status,
                headers=dict(reply.headers),
                media_type=reply.content_type,
            )

        async def events() -> AsyncIterator[bytes]:
            for data in reply.events or ():
                yield f"data: {data}\n\n".encode()

        return StreamingResponse(
            events(),
            status_code=reply.status,
            headers=dict(reply.headers),
            media_type=reply.content_type,
        )
