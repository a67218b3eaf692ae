"""The AG-UI endpoint: POST a ``RunAgentInput``, read the run as AG-UI events (SSE).

`AGUIEndpoint` is an ASGI application for one App built from an agent: mount it in any
Starlette (or FastAPI) application, beside the approval server or inside it
(`agui_app` makes a Starlette application of it alone). Who calls is the approval server's
business too: the same authenticator (`TokenAuth`, `StoreAuth`) turns the request's bearer
token into an `Identity`, whose principal decides the questions the run answers.

Refused before the stream opens, as JSON ``{"error": code, "message": ...}``: a request with no
valid token (401) or whose body is not a ``RunAgentInput`` (422, 413 when too large). Every
other refusal is the run's ``RUN_ERROR`` (see `RunRefused`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
import msgspec
from ag_ui.core import BaseEvent, RunAgentInput
from ag_ui.encoder import EventEncoder
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ..runtime import App
from ..server import Authenticator
from ._errors import HTTP_STATUS, RefusalCode
from ._run import AGUIRun

__all__ = ["AGUIEndpoint", "agui_app"]


class AGUIEndpoint:
    """An interlock agent as an AG-UI endpoint (an ASGI application; POST only).

    Args:
        app: The App of an agent (``agent.compile(store=...)``): its state has ``messages``.
        auth: Who may call: the approval server's authenticator (`TokenAuth`, `StoreAuth`, or
            anything with ``authenticate(header) -> Identity | None``). A caller needs the
            ``approver`` role, and the thread within its scope.
        four_eyes: Refuse a decision by the identity that started the run that asks.
        busy_timeout: Seconds a resume whose questions someone else decided waits for
            whoever continues the thread, to end with what it looks like then.
        max_body_bytes: Larger request bodies are refused (413).

    Example:
        >>> from interlock.agents import ScriptedModel, ToolAgent
        >>> from interlock.server import Identity, TokenAuth, hash_token
        >>> agent = ToolAgent("helper", ScriptedModel(["Hello!"]))
        >>> auth = TokenAuth({hash_token("s3cret"): Identity(name="ana", role="approver")})
        >>> endpoint = AGUIEndpoint(agent.compile(), auth=auth)
        >>> endpoint
        <AGUIEndpoint helper>
    """

    def __init__(
        self,
        app: App[Any],
        *,
        auth: Authenticator,
        four_eyes: bool = False,
        busy_timeout: float = 30.0,
        max_body_bytes: int = 1_000_000,
    ) -> None:
        if not isinstance(app, App):
            raise TypeError(f"app must be an App (agent.compile(...)), not {app!r}")
        if "messages" not in app.plan.schema.names:
            raise TypeError(
                f"app {app.plan.name!r} has no messages in its state: the AG-UI endpoint serves "
                "an App built from an agent (agent.compile(store=...))"
            )
        if not callable(getattr(auth, "authenticate", None)):
            raise TypeError(
                "auth must have authenticate(header) -> Identity | None, e.g. "
                "interlock.server.TokenAuth.from_file('tokens.toml')"
            )
        for name, value in (("busy_timeout", busy_timeout), ("max_body_bytes", max_body_bytes)):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{name} must be a number, not {value!r}")
            if not value > 0:
                raise ValueError(f"{name} must be more than 0, not {value!r}")
        self.app = app
        self.auth = auth
        self.four_eyes = bool(four_eyes)
        self.busy_timeout = float(busy_timeout)
        self.max_body_bytes = int(max_body_bytes)

    def __repr__(self) -> str:
        return f"<AGUIEndpoint {self.app.plan.name}>"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)  # served alone: nothing to start (see `agui_app`)
            return
        if scope["type"] != "http":
            await send({"type": "websocket.close", "code": 1003})
            return
        response = await self.respond(Request(scope, receive))
        await response(scope, receive, send)

    async def respond(self, request: Request) -> Response:
        """The answer to one request: the run's event stream, or a refusal before it."""
        if request.method != "POST":
            return _refusal(
                405, "method_not_allowed", "POST a RunAgentInput to this endpoint", Allow="POST"
            )
        identity = self.auth.authenticate(request.headers.get("authorization"))
        if identity is None:
            return _refused(
                "unauthenticated",
                "send Authorization: Bearer <token> with a token the server knows",
                **{"WWW-Authenticate": "Bearer"},
            )
        body = await _body(request, self.max_body_bytes)
        if body is None:
            return _refusal(
                413, "too_large", f"the body is larger than {self.max_body_bytes} bytes"
            )
        try:
            run_input = RunAgentInput.model_validate_json(body)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}"
                for e in exc.errors()[:5]
            )
            return _refused("invalid_input", f"the body is not a RunAgentInput: {problems}")
        run = AGUIRun(
            app=self.app,
            identity=identity,
            input=run_input,
            four_eyes=self.four_eyes,
            busy_timeout=self.busy_timeout,
        )
        encoder = EventEncoder(accept=request.headers.get("accept", ""))
        return _EventStream(
            _encoded(run.events(), encoder.encode),
            media_type=encoder.get_content_type(),
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )


class _EventStream(StreamingResponse):
    """A streamed answer that watches for its reader leaving, whatever the server's ASGI
    version: the run of a front-end that went away is cancelled at once (the thread stays at
    its last checkpoint, resumable), not at its next event."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with anyio.create_task_group() as group:

            async def stream() -> None:
                await self.stream_response(send)
                group.cancel_scope.cancel()

            group.start_soon(stream)
            await self.listen_for_disconnect(receive)
            group.cancel_scope.cancel()


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _encoded(
    events: AsyncIterator[BaseEvent], encode: Callable[[BaseEvent], str]
) -> AsyncIterator[str]:
    async for event in events:
        yield encode(event)


async def _body(request: Request, limit: int) -> bytes | None:
    """The request's body, or None once it grows past ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _refused(code: RefusalCode, message: str, **headers: str) -> Response:
    return _refusal(HTTP_STATUS[code], code, message, **headers)


def _refusal(status: int, code: str, message: str, **headers: str) -> Response:
    body = msgspec.json.encode({"error": code, "message": message})
    return Response(body, status, media_type="application/json", headers=headers)


def agui_app(
    app: App[Any],
    *,
    auth: Authenticator,
    four_eyes: bool = False,
    busy_timeout: float = 30.0,
    max_body_bytes: int = 1_000_000,
) -> Starlette:
    """An ASGI application serving `AGUIEndpoint` for ``app`` at ``/`` (POST).

    Its lifespan runs an authenticator that follows a store (`StoreAuth`); mounted beside the
    approval server with the same authenticator, that server's lifespan runs it instead. The
    arguments are `AGUIEndpoint`'s.
    """
    endpoint = AGUIEndpoint(
        app,
        auth=auth,
        four_eyes=four_eyes,
        busy_timeout=busy_timeout,
        max_body_bytes=max_body_bytes,
    )

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        if isinstance(auth, AbstractAsyncContextManager):
            async with auth:
                yield
        else:
            yield

    return Starlette(routes=[Route("/", endpoint, methods=["POST"])], lifespan=lifespan)
