"""The AG-UI endpoint on loopback for the tests: an ops agent, its identities, uvicorn.

The server runs in a thread of its own with its own event loop and its own App (built there
by a factory), as it would in another process; the tests talk to it over HTTP and read the
same SQLite file through Apps of their own. The tool counts its runs in `RUNS`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
from starlette.applications import Starlette
from starlette.routing import Mount, Route
from starlette.types import ASGIApp

from interlock import App, Authority, SqliteStore, emit_event
from interlock.agents import (
    ApprovalPolicy,
    ScriptedModel,
    ToolAgent,
    ToolMessage,
    call,
    require_approval,
    tool,
)
from interlock.agui import AGUIEndpoint, agui_app
from interlock.server import Identity, TokenAuth, create_app, hash_token

TOKENS = {
    "ana": ("ana-token", Identity(name="ana", role="approver", groups=("ops",))),
    "olga": ("olga-token", Identity(name="olga", role="approver", groups=("ops",))),
    "ben": ("ben-token", Identity(name="ben", role="approver")),
    "vic": ("vic-token", Identity(name="vic", role="viewer", groups=("ops",))),
}
"""name: (token, identity). Only the ``ops`` group may decide the agent's calls."""

RUNS: list[str] = []
"""The commands `execute` ran, in order (the side effect the tests count)."""


@tool
def execute(command: str) -> str:
    """Run a shell command.

    Args:
        command: The command line.
    """
    emit_event({"running": command})
    RUNS.append(command)
    return f"ran: {command}"


WATCHING = threading.Event()
"""Set once `watch` runs."""
CANCELLED = threading.Event()
"""Set once `watch` is cancelled."""


@tool
async def watch(topic: str) -> str:
    """Watch a topic until cancelled (a call that never ends by itself).

    Args:
        topic: What to watch.
    """
    WATCHING.set()
    try:
        await anyio.sleep_forever()
    except anyio.get_cancelled_exc_class():
        CANCELLED.set()
        raise
    return topic


def script(messages: Any, tools: Any) -> Any:
    """Asks to run what the user wrote (``watch X`` watches X); once a tool answered,
    reports it."""
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return f"Done: {last.content}"
    if last.content.startswith("watch "):
        return call("watch", {"topic": last.content.removeprefix("watch ")})
    return call("execute", {"command": last.content})


def ops_agent(*, stream: bool = False, approvals: int = 1) -> ToolAgent:
    gate = require_approval(authority=Authority(groups=("ops",)), approvals=approvals)
    policy = ApprovalPolicy({"execute": gate, "watch": "allow"})
    return ToolAgent("ops", ScriptedModel(script), [execute, watch], policy=policy, stream=stream)


def ops_app(path: Path, *, stream: bool = False, approvals: int = 1) -> App[Any]:
    return ops_agent(stream=stream, approvals=approvals).compile(store=SqliteStore(path))


def auth() -> TokenAuth:
    return TokenAuth({hash_token(token): identity for token, identity in TOKENS.values()})


def bearer(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name][0]}"}


def agui_only(
    path: Path, *, stream: bool = False, approvals: int = 1, four_eyes: bool = False
) -> Callable[[], ASGIApp]:
    """A factory of the endpoint alone, at ``/``."""
    return lambda: agui_app(
        ops_app(path, stream=stream, approvals=approvals), auth=auth(), four_eyes=four_eyes
    )


def endpoint_alone(path: Path) -> Callable[[], ASGIApp]:
    """A factory of the bare `AGUIEndpoint`, served as the whole application."""
    return lambda: AGUIEndpoint(ops_app(path), auth=auth())


def beside_server(path: Path) -> Callable[[], ASGIApp]:
    """A factory of one application: the endpoint at ``/agui``, the approval server at ``/``
    (both on one App, with one authenticator)."""

    def build() -> ASGIApp:
        app, tokens = ops_app(path), auth()
        server = create_app(app, auth=tokens)
        return Starlette(
            routes=[
                Route("/agui", AGUIEndpoint(app, auth=tokens), methods=["POST"]),
                Mount("/", server),
            ],
            lifespan=server.router.lifespan_context,
        )

    return build


def _stores_of(asgi: Any) -> list[Any]:
    """The stores of the Apps an application serves (to close them where they were opened)."""
    if isinstance(asgi, AGUIEndpoint):
        return [asgi.app.store]
    found: list[Any] = []
    for route in getattr(asgi, "routes", ()):
        inner = getattr(route, "app", None)
        if isinstance(inner, AGUIEndpoint):
            found.append(inner.app.store)
        elif inner is not None and inner is not asgi:
            found += _stores_of(inner)
        endpoint = getattr(route, "endpoint", None)
        if isinstance(endpoint, AGUIEndpoint):
            found.append(endpoint.app.store)
    return list({id(s): s for s in found}.values())


@contextmanager
def serving(factory: Callable[[], ASGIApp]) -> Iterator[str]:
    """Run ``factory()`` (built in the server's thread) under uvicorn on a free port; its URL."""
    # Imported here: processes that import this module for its apps have only its folder
    # on their path, not the tests' root.
    from _uvicorn import uvicorn_thread

    with uvicorn_thread(factory, _stores_of) as (url, _):
        yield url


def run_input(thread: str, *, messages: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """A RunAgentInput body as a front-end sends it (camelCase)."""
    run = f"run-{time.monotonic_ns()}"
    return {"threadId": thread, "runId": run, "messages": messages, **fields}


def user(text: str, mid: str) -> dict[str, Any]:
    return {"id": mid, "role": "user", "content": text}


def post_run(url: str, who: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """POST a run and read its events (the SSE ``data:`` lines, as JSON)."""
    import json

    with httpx.stream(
        "POST",
        url,
        json=body,
        headers={**bearer(who), "Accept": "text/event-stream"},
        timeout=30,
    ) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return [
            json.loads(line[len("data: ") :])
            for line in response.iter_lines()
            if line.startswith("data: ")
        ]


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def one(events: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    """The one event of this type (and, for ``CUSTOM``, this name)."""
    found = [e for e in events if e["type"] == kind and name in (None, e.get("name"))]
    assert len(found) == 1, (kind, name, kinds(events))
    return found[0]


ALREADY = "interlock.already_decided"
