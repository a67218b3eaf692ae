"""A remote A2A agent built only with the official ``a2a-sdk``, and a local agent that calls it.

The remote, ``deployer``, asks its caller for an approval of its own before it acts: a new
task goes ``auth-required`` with a status message of a text part (the question) and a data
part (the tool and arguments it wants to run). An answer that approves (``true``, a text
``approve``, or a data part ``{"approved": true}``) completes the task with an artifact; any
other answer rejects it, with the answer's text as the reason. It counts the tasks it creates
and the answers it receives. It is served by uvicorn on a free loopback port, in a thread with
its own event loop, as another machine would serve it. With ``ask_version``, an approved task
asks a second question (``input-required``: which version?) before it completes.

``python _remote.py URL DB THREAD [--until-asked]`` runs the local agent in a process of its
own on the SQLite file DB: it starts THREAD and prints ``asked`` once the run stopped on the
remote agent's question (the question is committed), then waits to be killed. Without
``--until-asked`` it prints nothing and is killed while it waits on the remote task.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import uvicorn
from a2a.helpers import (
    get_data_parts,
    get_text_parts,
    new_data_part,
    new_task_from_user_message,
    new_text_part,
)
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from starlette.applications import Starlette

from interlock import Authority, SqliteStore
from interlock.a2a import remote_agent
from interlock.agents import (
    ApprovalPolicy,
    ScriptedModel,
    ToolAgent,
    ToolMessage,
    call,
)

APPROVAL = {"type": "approval", "tool": "deploy", "arguments": {"service": "web", "env": "prod"}}
"""The data part of the remote agent's question: the call it asks its caller to approve."""
QUESTION = "Approve deploying web to prod?"
"""The text part of the remote agent's question."""
REQUEST = "deploy web to prod"
"""What the local model asks the remote agent."""


@dataclass
class Deployer(AgentExecutor):
    """The remote agent's logic: ask for an approval, then deploy or refuse."""

    created: list[tuple[str, str, str]] = field(default_factory=list)
    """(task id, context id, request) of each task created."""
    answers: list[tuple[str, list[str], list[Any]]] = field(default_factory=list)
    """(task id, text parts, data parts) of each answer received."""
    gate: threading.Event = field(default_factory=threading.Event)
    """A new task works until this is set, then asks (set from the start unless held)."""
    ask_version: bool = False
    """Once approved, ask a second question (``input-required``): which version to deploy."""
    approved: set[str] = field(default_factory=set)
    """The tasks approved so far."""

    def __post_init__(self) -> None:
        self.gate.set()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(message)
            await event_queue.enqueue_event(task)
            self.created.append((task.id, task.context_id, context.get_user_input()))
            updater = TaskUpdater(event_queue, task.id, task.context_id)
            await updater.start_work()
            await anyio.to_thread.run_sync(self.gate.wait)
            await updater.requires_auth(
                updater.new_agent_message([new_text_part(QUESTION), new_data_part(APPROVAL)])
            )
            return
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        texts, data = get_text_parts(message.parts), get_data_parts(message.parts)
        self.answers.append((task.id, texts, data))
        if task.id in self.approved:  # the answer to the second question: the version
            deployed = f"deployed web {' '.join(texts)} to prod"
            await updater.add_artifact([new_text_part(deployed)], name="deploy")
            await updater.complete()
        elif _approves(texts, data):
            self.approved.add(task.id)
            if self.ask_version:
                ask = updater.new_agent_message([new_text_part("Which version?")])
                await updater.requires_input(ask)
                return
            await updater.add_artifact([new_text_part("deployed web to prod")], name="deploy")
            await updater.complete()
        else:
            reason = " ".join(texts) or "no reason given"
            await updater.reject(updater.new_agent_message([new_text_part(f"refused: {reason}")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError("the deployer cannot be cancelled")


def _approves(texts: list[str], data: list[Any]) -> bool:
    if any(t.strip().lower() == "approve" for t in texts):
        return True
    return any(d is True or (isinstance(d, dict) and d.get("approved") is True) for d in data)


def _card(url: str) -> AgentCard:
    return AgentCard(
        name="deployer",
        description="Deploys services, once its caller approves.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(protocol_binding="JSONRPC", url=url, protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(id="deploy", name="deploy", description="Deploy a service.", tags=["ops"])
        ],
    )


class CountingHandler(DefaultRequestHandler):
    """The SDK's request handler, telling when a caller first asks for a task's state."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.polled = threading.Event()

    async def on_get_task(self, params: Any, context: Any) -> Any:
        found = await super().on_get_task(params, context)
        self.polled.set()
        return found


@dataclass
class Remote:
    """The remote agent, running."""

    url: str
    deployer: Deployer
    polled: threading.Event
    """Set once a caller asked for a task's state (it recorded the task id first)."""


@contextmanager
def serve_remote(*, held: bool = False, ask_version: bool = False) -> Iterator[Remote]:
    """Serve a `Deployer` on a free loopback port (uvicorn in a thread of its own); ``held``:
    its new tasks work until ``deployer.gate`` is set."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    deployer = Deployer(ask_version=ask_version)
    if held:
        deployer.gate.clear()
    card = _card(url)
    handler = CountingHandler(
        agent_executor=deployer, task_store=InMemoryTaskStore(), agent_card=card
    )
    app = Starlette(
        routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/")]
    )
    config = uvicorn.Config(app, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the remote A2A agent did not start")
        time.sleep(0.01)
    try:
        yield Remote(url=url, deployer=deployer, polled=handler.polled)
    finally:
        deployer.gate.set()
        server.should_exit = True
        thread.join(15)
        sock.close()


def respond(messages: list[Any], tools: Any) -> Any:
    """The local model: ask the remote deployer, then report what it answered."""
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return f"Remote says: {last.content}"
    return call("deployer", {"request": REQUEST})


def local_agent(
    url: str,
    *,
    policy: ApprovalPolicy | None = None,
    authority: Authority | None = None,
    unreachable_after: float = 60.0,
) -> ToolAgent:
    """``ops``: a scripted model with the remote deployer as its one tool."""
    deployer = remote_agent(
        "deployer",
        url,
        authority=authority,
        poll_interval=0.05,
        unreachable_after=unreachable_after,
    )
    return ToolAgent("ops", ScriptedModel(respond), [deployer], policy=policy)


async def _main(url: str, db: str, thread: str, until_asked: bool) -> None:
    async with SqliteStore(db) as store:
        app = local_agent(url).compile(store=store)
        result = await app.run({"messages": [REQUEST]}, thread=thread)
        assert result.status == "interrupted", result.status
        print("asked", flush=True)
        await anyio.sleep_forever()


if __name__ == "__main__":
    _main_args = sys.argv[1:]
    anyio.run(_main, *_main_args[:3], "--until-asked" in _main_args)
