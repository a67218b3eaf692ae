"""A small Gemini endpoint on loopback, playing the replies a test scripts.

`FakeGemini` serves ``POST /v1beta/models/{model}:generateContent`` and
``:streamGenerateContent?alt=sse`` over real HTTP (Starlette under uvicorn, in a background
thread), for what LLMock's Gemini routes cannot produce: a blocked prompt, safety stops, cached
and thinking tokens, call ids, Gemini's ``RetryInfo`` error details, broken bodies and streams.
Each request takes the next scripted reply (`Scripted`, shared with the OpenAI fake) and is
recorded in `FakeGemini.requests`.
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import anyio.to_thread
import uvicorn
from _fake_openai import Recorded, Scripted
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = ["FakeGemini", "gemini_error", "response", "streamed"]


def response(
    *parts: Mapping[str, Any],
    finish: str | None = "STOP",
    usage: Mapping[str, int] | None = None,
    feedback: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``GenerateContentResponse`` body with one candidate holding ``parts``."""
    body: dict[str, Any] = {}
    if parts or finish is not None:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
        if finish is not None:
            candidate["finishReason"] = finish
        body["candidates"] = [candidate]
    if usage is not None:
        body["usageMetadata"] = dict(usage)
    if feedback is not None:
        body["promptFeedback"] = dict(feedback)
    return body


def whole(body: Mapping[str, Any] | str) -> Scripted:
    """A non-streamed reply with this body (a ``str`` is sent verbatim)."""
    data = body if isinstance(body, str) else json.dumps(body)
    return Scripted(body=data.encode())


def streamed(*bodies: Mapping[str, Any] | str) -> Scripted:
    """An SSE stream of response bodies; a ``str`` is sent as the event's data verbatim."""
    events = [b if isinstance(b, str) else json.dumps(b) for b in bodies]
    return Scripted(events=events, content_type="text/event-stream")


def gemini_error(
    status: int,
    state: str,
    message: str,
    *,
    retry_delay: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Scripted:
    """An error status with Gemini's error body (and its ``RetryInfo`` detail if given)."""
    error: dict[str, Any] = {"code": status, "message": message, "status": state}
    if retry_delay is not None:
        error["details"] = [
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay}
        ]
    return Scripted(
        status=status, headers=dict(headers or {}), body=json.dumps({"error": error}).encode()
    )


class FakeGemini:
    """A Gemini endpoint on loopback; use it as a context manager."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        """Every request received, in order."""
        self.paths: list[str] = []
        """The path (and query) of every request, in order."""
        self._replies: deque[Scripted] = deque()
        self._release = threading.Event()
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(16)
        self.port: int = self._socket.getsockname()[1]
        app = Starlette(routes=[Route("/v1beta/models/{call:path}", self._call, methods=["POST"])])
        config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )

    @property
    def base_url(self) -> str:
        """The API's root URL (what the model takes as ``base_url``)."""
        return f"http://127.0.0.1:{self.port}"

    def script(self, *replies: Scripted) -> None:
        """Queue replies: each request takes the next one."""
        self._replies.extend(replies)

    def reset(self) -> None:
        """Forget the queued replies and the recorded requests, and let stalled replies end."""
        self._release.set()
        self._release = threading.Event()
        self._replies.clear()
        self.requests.clear()
        self.paths.clear()

    def __enter__(self) -> FakeGemini:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._release.set()
        self._server.should_exit = True
        self._thread.join()
        self._socket.close()

    async def _call(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(Recorded(body=body, headers=dict(request.headers)))
        self.paths.append(
            str(request.url.path) + ("?" + request.url.query if request.url.query else "")
        )
        if not self._replies:
            return JSONResponse(
                {"error": {"code": 400, "message": "no scripted reply left", "status": "X"}},
                status_code=400,
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
        events: Sequence[str] = reply.events

        async def send() -> AsyncIterator[bytes]:
            for data in events:
                yield f"data: {data}\r\n\r\n".encode()

        return StreamingResponse(
            send(),
            status_code=reply.status,
            headers=dict(reply.headers),
            media_type=reply.content_type,
        )
