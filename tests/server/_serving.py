"""A real approval server on loopback for the tests, and the apps it serves.

The server runs in a thread of its own with its own event loop and its own `App` objects
(built there by a factory), as it would in another process; the tests talk to it over HTTP
and read the same SQLite file through Apps of their own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import uvicorn
from starlette.types import ASGIApp

from interlock import END, START, App, Graph, Price, SqliteStore, approve
from interlock.agents import (
    ApprovalPolicy,
    AssistantMessage,
    Budget,
    ScriptedModel,
    ToolAgent,
    ToolMessage,
    UserMessage,
    call,
    matches,
    require_approval,
    tool,
)
from interlock.graph import Usage
from interlock.server import Identity, TokenAuth, hash_token

TOKENS = {
    "ana": ("ana-token", Identity(name="ana", role="approver")),
    "ben": ("ben-token", Identity(name="ben", role="approver")),
    "vic": ("vic-token", Identity(name="vic", role="viewer")),
    "root": ("root-token", Identity(name="root", role="admin")),
    "mailer": ("mailer-token", Identity(name="mailer", role="approver", tools=("send_*",))),
    "ops": ("ops-token", Identity(name="ops", role="approver", threads=("ops-",))),
    "clerk": ("clerk-token", Identity(name="clerk", role="approver", tools=("refund",))),
    "auditor": ("auditor-token", Identity(name="auditor", role="admin", tools=("refund",))),
    "outsider": ("outsider-token", Identity(name="outsider", role="admin", threads=("other-",))),
}
"""name: (token, identity)."""


def wait_for(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    """Poll ``check`` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.02)


def auth() -> TokenAuth:
    return TokenAuth({hash_token(token): identity for token, identity in TOKENS.values()})


def bearer(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name][0]}"}


class Order(TypedDict, total=False):
    n: int
    approved: bool
    done: bool


def order_app(path: Path) -> App[Any]:
    """prepare → review (a person approves) → finish, on a SQLite file."""
    return order_graph().compile(store=SqliteStore(path))


def order_graph() -> Graph[Order]:
    """prepare → review (a person approves) → finish."""

    def prepare(state: Order) -> Order:
        return {"n": state.get("n", 0) + 1}

    def review(state: Order) -> Order:
        return {"approved": approve(f"Ship order {state['n']}?", details={"n": state["n"]})}

    def finish(state: Order) -> Order:
        return {"done": True}

    g = Graph(Order, name="orders")
    g.add_node("prepare", prepare).add_node("review", review).add_node("finish", finish)
    g.add_edge(START, "prepare").add_edge("prepare", "review")
    g.add_edge("review", "finish").add_edge("finish", END)
    return g


def two_step_app(path: Path) -> App[Any]:
    """Two approvals in a row: ship, then invoice."""

    def ship(state: Order) -> Order:
        return {"approved": approve("Ship it?")}

    def invoice(state: Order) -> Order:
        return {"done": approve("Send the invoice?")}

    g = Graph(Order, name="two_steps")
    g.add_node("ship", ship).add_node("invoice", invoice)
    g.add_edge(START, "ship").add_edge("ship", "invoice").add_edge("invoice", END)
    return g.compile(store=SqliteStore(path))


def failing_update_graph(name: str) -> Graph[Order]:
    """An approval, then a node whose update the state cannot take: the continuation after the
    decision fails (`InvalidUpdate`) and leaves the thread failed."""

    def review(state: Order) -> Order:
        return {"approved": approve("Ship it?")}

    def finish(state: Order) -> Any:
        # Markup in the error: a page that shows it must show it as text.
        return {"<b>no_such_key</b>": True}

    g = Graph(Order, name=name)
    g.add_node("review", review).add_node("finish", finish)
    g.add_edge(START, "review").add_edge("review", "finish").add_edge("finish", END)
    return g


def quorum_app(path: Path) -> App[Any]:
    """One payment that two distinct people must approve."""

    def pay(state: Order) -> Order:
        return {"approved": approve("Pay 9,000 EUR?", approvals=2)}

    g = Graph(Order, name="payments")
    g.add_node("pay", pay).add_edge(START, "pay").add_edge("pay", END)
    return g.compile(store=SqliteStore(path))


@tool
def send_email(to: str, body: str) -> str:
    """Send an email.

    Args:
        to: The address.
        body: The text.
    """
    return f"sent to {to}"


BUDGET_TURN = Usage(input_tokens=15_000, output_tokens=5_000, cached_tokens=1_000)
"""What each call of the budget agent's model uses."""


def budget_agent(path: Path) -> App[Any]:
    """An agent (``gpt-4o``, priced) that adds three times; its budget is 40,000 tokens, so
    it asks before its third turn whether it may go on."""

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    def script(messages: Any, tools: Any) -> Any:
        done = sum(isinstance(m, ToolMessage) for m in messages)
        if done < 3:
            return AssistantMessage(
                tool_calls=(call("add", {"a": done, "b": 1}),), usage=BUDGET_TURN
            )
        return AssistantMessage(content=f"added {done} times", usage=BUDGET_TURN)

    agent = ToolAgent(
        "adder", ScriptedModel(script, name="gpt-4o"), [add], budget=Budget(tokens=40_000)
    )
    return agent.compile(
        store=SqliteStore(path), prices={"gpt-4o": Price(input=2.5, output=10.0, cached=1.25)}
    )


def mail_agent(path: Path) -> App[Any]:
    """An agent whose every send_email call waits for a person."""

    def script(messages: Any, tools: Any) -> Any:
        if isinstance(messages[-1], UserMessage):
            return call("send_email", {"to": "cfo@example.com", "body": messages[-1].content})
        return f"finished: {messages[-1].content}"

    policy = ApprovalPolicy({"send_email": [require_approval(name="mail")]})
    agent = ToolAgent("mailer", ScriptedModel(script, name="mailer"), [send_email], policy=policy)
    return agent.compile(store=SqliteStore(path))


@tool
def wipe_disk(device: str) -> str:
    """Erase a disk.

    Args:
        device: The device to erase.
    """
    if "BROKEN" in device:
        raise RuntimeError(f"cannot wipe {device}")
    return f"wiped {device}"


@tool
def refund(amount: int) -> str:
    """Refund an order.

    Args:
        amount: How much, in euros.
    """
    return f"refunded {amount} EUR"


WIPE_SECRETS = ("wipe_disk", "SECRET")
"""What the calls of `wipe_disk` in `ops_agent`'s threads hold (its name and devices): none of it
may reach an identity whose scopes leave the tool out."""


def ops_agent(path: Path) -> App[Any]:
    """An agent that wipes a disk, then refunds 5 EUR; each call waits for a person.

    Told "go", it asks to wipe ``/dev/SECRET-A``; told "break", ``/dev/BROKEN-SECRET``, on
    which the tool raises and the run fails (``tool_errors="raise"``). The device is not in
    the user's message: only the calls and their records hold it.
    """

    def script(messages: Any, tools: Any) -> Any:
        last = messages[-1]
        if isinstance(last, UserMessage):
            device = "/dev/BROKEN-SECRET" if last.content == "break" else "/dev/SECRET-A"
            return call("wipe_disk", {"device": device})
        if isinstance(last, ToolMessage) and last.name == "wipe_disk":
            return call("refund", {"amount": 5})
        return "Done."

    policy = ApprovalPolicy(
        {"wipe_disk": [require_approval(name="disks")], "refund": [require_approval(name="money")]}
    )
    model = ScriptedModel(script, name="ops")
    agent = ToolAgent("ops", model, [wipe_disk, refund], policy=policy, tool_errors="raise")
    return agent.compile(store=SqliteStore(path))


@tool
def execute(command: str) -> str:
    """Run a shell command.

    Args:
        command: The command line.
    """
    return f"ran: {command}"


def shell_agent(path: Path) -> App[Any]:
    """An agent that runs the command it is told ("run ls /tmp"); each call waits for a person,
    and a command that removes files (``rm``) asks for a confirmation step too."""

    def script(messages: Any, tools: Any) -> Any:
        last = messages[-1]
        if isinstance(last, UserMessage):
            return call("execute", {"command": last.content.removeprefix("run ")})
        return f"Done: {last.content}"

    policy = ApprovalPolicy(
        {
            "execute": [
                require_approval(when=matches("command", r"\brm\b"), name="removes", confirm=True),
                require_approval(name="shell"),
            ]
        }
    )
    agent = ToolAgent("shell", ScriptedModel(script, name="shell"), [execute], policy=policy)
    return agent.compile(store=SqliteStore(path))


def release_app(path: Path) -> App[Any]:
    """One approve() question that asks for a confirmation step: publish a release."""

    def publish(state: Order) -> Order:
        return {"approved": approve(f"Publish release {state['n']}?", confirm=True)}

    g = Graph(Order, name="releases")
    g.add_node("publish", publish).add_edge(START, "publish").add_edge("publish", END)
    return g.compile(store=SqliteStore(path))


@dataclass
class Serving:
    """A server running on loopback."""

    url: str
    server: uvicorn.Server


def _stores_of(asgi: Any) -> list[Any]:
    """The stores of the apps an approval server (or an app it is mounted in) serves."""
    state = getattr(getattr(asgi, "state", None), "interlock", None)
    if state is not None:
        return [served.store for served in state.served.values()]
    return [store for route in getattr(asgi, "routes", ()) for store in _stores_of(route.app)]


@contextmanager
def serving(factory: Callable[[], ASGIApp]) -> Iterator[Serving]:
    """Run ``factory()`` (built in the server's thread) under uvicorn on a free port."""
    # Imported here: processes that import this module for its apps have only its folder
    # on their path, not the tests' root.
    from _uvicorn import uvicorn_thread

    with uvicorn_thread(factory, _stores_of) as (url, server):
        yield Serving(url=url, server=server)


def env_order_app() -> App[Any]:
    """`order_app` on the file named by ``INTERLOCK_TEST_DB`` (for ``interlock serve --app``)."""
    import os

    return order_app(Path(os.environ["INTERLOCK_TEST_DB"]))


@dataclass
class ServeProcess:
    """``interlock serve`` running in a process of its own."""

    url: str
    log: Path
    """Its stdout and stderr."""
    returncode: int | None = None
    """Set once it stopped."""


@contextmanager
def serve_process(
    db: Path, tokens: Path, *, stop: int = 15, extra: Sequence[str] = ()
) -> Iterator[ServeProcess]:
    """``interlock serve`` for `env_order_app` on ``db``, on a port the system picks (read
    from its banner); stopped with ``stop`` (SIGTERM). ``extra``: more options."""
    import os
    import re
    import signal
    import subprocess
    import sys

    import httpx2 as httpx

    log_path = db.parent / f"serve-{db.stem}-{time.monotonic_ns()}.log"
    command = ["interlock", "serve", "--app", "_serving:env_order_app", "--tokens", str(tokens)]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", *command, "--port", "0", *extra],
            cwd=Path(__file__).resolve().parent,
            env={**os.environ, "INTERLOCK_TEST_DB": str(db)},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    running = ServeProcess(url="", log=log_path)
    try:
        deadline = time.monotonic() + 30
        while True:
            found = re.search(r" on (http://127\.0\.0\.1:\d+) ", log_path.read_text())
            if found:
                running.url = found.group(1)
                try:
                    if httpx.get(running.url + "/readyz").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"interlock serve did not start: {log_path.read_text()}")
            time.sleep(0.05)
        yield running
    finally:
        proc.send_signal(signal.Signals(stop))
        running.returncode = proc.wait(30)
