"""An interlock agent served over A2A on loopback, and the SDK's own client to talk to it.

The server runs under uvicorn in a thread of its own, with its own event loop and its own
`App` (built there, on a SQLite file, by `ops_app`), as it would in another process; the
tests talk to it with the ``a2a-sdk`` client over HTTP and read the same file through Apps of
their own.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import uvicorn
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import new_data_part
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
)
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from interlock import App, Authority, Graph, SqliteStore
from interlock.a2a import a2a_app, agent_card
from interlock.agents import (
    ApprovalPolicy,
    ScriptedModel,
    ToolAgent,
    ToolMessage,
    UserMessage,
    call,
    require_approval,
    tool,
)
from interlock.server import Identity, TokenAuth, hash_token

TOKENS = {
    "ana": ("ana-token", Identity(name="ana", role="approver", groups=("sre",))),
    "sam": ("sam-token", Identity(name="sam", role="approver", groups=("sre",))),
    "bob": ("bob-token", Identity(name="bob", role="approver")),
    "vic": ("vic-token", Identity(name="vic", role="viewer", groups=("sre",))),
    "out": ("out-token", Identity(name="out", role="approver", groups=("sre",), threads=("x-",))),
}
"""name: (token, identity). Only the ``sre`` group may approve a deploy."""

RAN: list[str] = []
"""The commands `deploy` ran, in every server of the test process."""


@tool
def deploy(service: str) -> str:
    """Deploy a service to production.

    Args:
        service: The service to deploy.
    """
    if "BROKEN" in service:
        raise RuntimeError(f"the deploy of {service} failed: the cluster refused it")
    RAN.append(service)
    return f"deployed {service}"


def ops_agent(approvals: int = 1) -> ToolAgent:
    """An agent that deploys the service it is told ("deploy web"); each deploy waits for
    approval by a member of group sre (``approvals`` of them). A service named BROKEN fails
    the run."""

    def script(messages: Any, tools: Any) -> Any:
        last = messages[-1]
        if isinstance(last, UserMessage):
            return call("deploy", {"service": last.content.removeprefix("deploy ")})
        if isinstance(last, ToolMessage):
            return f"Done: {last.content}"
        return "?"

    policy = ApprovalPolicy(
        {
            "deploy": [
                require_approval(
                    name="deploys", authority=Authority(groups=("sre",)), approvals=approvals
                )
            ]
        }
    )
    model = ScriptedModel(script, name="ops")
    return ToolAgent("ops", model, [deploy], policy=policy, tool_errors="raise")


def ops_app(path: Path) -> App[Any]:
    return ops_agent().compile(store=SqliteStore(path))


def auth() -> TokenAuth:
    return TokenAuth({hash_token(token): identity for token, identity in TOKENS.values()})


@dataclass
class Served:
    """An A2A server running on loopback."""

    url: str
    server: uvicorn.Server


@contextmanager
def serving(
    db: Path,
    *,
    with_auth: bool = True,
    push: bool = False,
    agent: Callable[[], ToolAgent] | None = None,
    graph: Callable[[], Graph[Any]] | None = None,
    input: Callable[[Any], Any] | None = None,
    port: int = 0,
) -> Iterator[Served]:
    """Serve an agent (`ops_agent` unless ``agent`` says) or a ``graph`` over A2A on a free
    port (or on ``port``, as a restarted server would), its App on ``db``, until the block
    ends."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))  # bound here, so the card can name the port before serving
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    holder: dict[str, Any] = {}

    def run() -> None:
        if graph is not None:
            app = graph().compile(store=SqliteStore(db))
            card = AgentCard(
                name="graph",
                description="A graph that asks.",
                version="1.0.0",
                supported_interfaces=[
                    AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
                ],
                capabilities=AgentCapabilities(streaming=True),
                default_input_modes=["text/plain"],
                default_output_modes=["text/plain"],
            )
        else:
            served_agent = (agent or ops_agent)()
            app = served_agent.compile(store=SqliteStore(db))
            card = agent_card(served_agent, url=url, bearer=with_auth, push_notifications=push)
        try:
            asgi = a2a_app(app, card, auth=auth() if with_auth else None, input=input)
            config = uvicorn.Config(
                asgi, log_level="warning", lifespan="on", timeout_graceful_shutdown=1
            )
            holder["server"] = server = uvicorn.Server(config)
            server.run(sockets=[sock])
        finally:
            anyio.run(app.store.close)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while "server" not in holder or not holder["server"].started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the A2A test server did not start")
        time.sleep(0.01)
    server: uvicorn.Server = holder["server"]
    try:
        yield Served(url=url, server=server)
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


@asynccontextmanager
async def client_of(
    served: Served, who: str | None, *, streaming: bool = False
) -> AsyncIterator[Client]:
    """The SDK's client for the server, calling as ``who`` (None: with no token); with
    ``streaming``, it sends ``SendStreamingMessage`` and reads the events as they come."""
    headers = {"Authorization": f"Bearer {TOKENS[who][0]}"} if who else {}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        factory = ClientFactory(ClientConfig(httpx_client=http, streaming=streaming))
        client = await factory.create_from_url(served.url)
        try:
            yield client
        finally:
            await client.close()


@asynccontextmanager
async def session(db: Path, who: str) -> AsyncIterator[Client]:
    """A server on ``db``, and the SDK's client calling it as ``who``."""
    with serving(db) as served:
        async with client_of(served, who) as client:
            yield client


def text_message(text: str, task: Task | None = None) -> Message:
    """A user's message with one text part (on ``task``, answering it)."""
    return _message([Part(text=text)], task)


def data_message(data: dict[str, Any], task: Task | None = None) -> Message:
    """A user's message with one data part (on ``task``, answering it)."""
    return _message([new_data_part(data)], task)


def _message(parts: list[Part], task: Task | None) -> Message:
    message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=parts)
    if task is not None:
        message.task_id = task.id
        message.context_id = task.context_id
    return message


async def send(client: Client, message: Message) -> Task:
    """Send ``message``; the task it leaves (the last one the server reported)."""
    found: list[StreamResponse] = [
        event async for event in client.send_message(SendMessageRequest(message=message))
    ]
    assert found and found[-1].HasField("task"), found
    return found[-1].task


def question_of(task: Task) -> dict[str, Any]:
    """The data part of a waiting task's status message (its one question)."""
    parts = [MessageToDict(p.data) for p in task.status.message.parts if p.HasField("data")]
    assert len(parts) == 1, task
    return parts[0]  # type: ignore[no-any-return]


def wait_for(check: Any, timeout: float = 10.0) -> Any:
    """Poll ``check`` until it returns something truthy (what another thread delivers)."""
    deadline = time.monotonic() + timeout
    while not (found := check()):
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.02)
    return found


def text_of(task: Task) -> str:
    return " ".join(p.text for p in task.status.message.parts if p.text)


@dataclass
class Receiver:
    """An HTTP endpoint on loopback that keeps what is posted to it."""

    url: str
    posted: list[tuple[dict[str, str], Any]]
    """(headers, JSON body) of each POST, in order."""


@contextmanager
def receiver() -> Iterator[Receiver]:
    """Receive push notifications on a free port until the block ends."""
    posted: list[tuple[dict[str, str], Any]] = []

    async def keep(request: Request) -> Response:
        posted.append((dict(request.headers), await request.json()))
        return Response(status_code=204)

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    asgi = Starlette(routes=[Route("/hook", keep, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(asgi, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the push receiver did not start")
        time.sleep(0.01)
    try:
        yield Receiver(url=f"http://127.0.0.1:{sock.getsockname()[1]}/hook", posted=posted)
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()
