"""The app the command-line tests name with ``--app _cli_app:make_app``.

One graph, three kinds of question, picked by the input's ``kind``:

* ``refund``: an `approve()` question (optionally with a deadline, ``deadline_in`` seconds
  from when it is asked; a negative one has already passed);
* ``plan``: a generic `interrupt()` whose answer schema takes ``{"plan": "basic" | "pro"}``;
* ``ops``: an agent whose ``execute`` tool call waits for approval (a scripted model asks for
  the command the user typed, then reports the tool's result);
* ``typed``: a question whose info is an `Order`, a type only this app's codec knows;
* ``quorum``: an `approve()` question that two different people must approve.

Its SQLite file is ``$INTERLOCK_TEST_DB``, read when `make_app` is called, so that each test
(and each process) names its own.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, TypedDict

import anyio
import msgspec

from interlock import (
    END,
    START,
    App,
    Authority,
    Graph,
    SqliteStore,
    append,
    approve,
    interrupt,
)
from interlock.agents import (
    ApprovalPolicy,
    Message,
    ScriptedModel,
    ToolAgent,
    ToolMessage,
    ToolSpec,
    UserMessage,
    call,
    tool,
)
from interlock.agents._agent import AGENT_TYPES

DB_VARIABLE = "INTERLOCK_TEST_DB"
REFUND_QUESTION = "Refund ¥5000 to customer 42?"
PLAN_SCHEMA = {
    "type": "object",
    "required": ["plan"],
    "properties": {"plan": {"enum": ["basic", "pro"]}},
    "additionalProperties": False,
}


class Order(msgspec.Struct, frozen=True):
    """A registered type inside a question."""

    number: int
    total: int


class State(TypedDict, total=False):
    kind: str
    deadline_in: float
    messages: Annotated[list[Any], append]
    refunded: bool
    plan: dict[str, Any]


@tool
def execute(command: str) -> str:
    """Run a shell command (this one only says what it would run).

    Args:
        command: The command line.
    """
    return f"ran: {command}"


def _script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return f"Finished ({last.status}): {last.content}"
    assert isinstance(last, UserMessage)
    return call("execute", {"command": last.content})


OPS = ToolAgent(
    "ops",
    ScriptedModel(_script, name="ops"),
    [execute],
    policy=ApprovalPolicy({"execute": "require_approval"}),
)


def refund(state: State) -> dict[str, Any]:
    seconds = state.get("deadline_in")
    deadline = None if seconds is None else datetime.now(UTC) + timedelta(seconds=seconds)
    return {"refunded": approve(REFUND_QUESTION, deadline=deadline)}


def plan(state: State) -> dict[str, Any]:
    answer = interrupt(
        {"question": "Which plan should customer 42 get?", "options": ["basic", "pro"]},
        key="plan",
        schema=PLAN_SCHEMA,
    )
    return {"plan": answer}


def typed(state: State) -> dict[str, Any]:
    return {"refunded": approve("Ship this order?", details=Order(number=42, total=5000))}


def quorum(state: State) -> dict[str, Any]:
    return {"refunded": approve("Wire $2M to the supplier?", approvals=2)}


def payout(state: State) -> dict[str, Any]:
    return {"refunded": approve("Pay out 9,000 EUR?", authority=Authority(not_starter=True))}


def finance(state: State) -> dict[str, Any]:
    return {"refunded": approve("Refund 1,200 EUR?", authority=Authority(groups=("finance",)))}


def drop(state: State) -> dict[str, Any]:
    return {"refunded": approve("Drop the orders table?", confirm=True)}


KINDS = ("refund", "plan", "ops", "typed", "quorum", "payout", "finance", "drop")


def build() -> Graph[State]:
    g: Graph[State] = Graph(State, types=(*AGENT_TYPES, Order))
    g.add_node("refund", refund)
    g.add_node("plan", plan)
    g.add_node("ops", OPS.app)
    g.add_node("typed", typed)
    g.add_node("quorum", quorum)
    g.add_node("payout", payout)
    g.add_node("finance", finance)
    g.add_node("drop", drop)
    g.add_conditional_edges(START, lambda s: s["kind"], list(KINDS))
    for name in KINDS:
        g.add_edge(name, END)
    return g


def make_app() -> App[State]:
    """The app on ``$INTERLOCK_TEST_DB``."""
    return build().compile(store=SqliteStore(os.environ[DB_VARIABLE]))


def start(kind: str, thread: str, started_by: str | None = None, **extra: Any) -> str:
    """Run a new thread until it asks its question; return the question's id."""
    app = make_app()
    metadata = None if started_by is None else {"started_by": started_by}

    async def go() -> str:
        try:
            result = await app.run({"kind": kind, **extra}, thread=thread, metadata=metadata)
            return result.interrupt().id
        finally:
            await app.store.close()

    return anyio.run(go)
