"""A question from three agents deep, answered from the top by its id.

Run it: ``python examples/budget_supervisor.py`` (writes ./budget-supervisor.db; ``--db PATH``).

The agents::

    pm            a supervisor: hands the request to the budget agent, then reports
    └─ budget     plan-execute: a planner writes the steps, the allocator does each one
       └─ allocator   a tool agent: allocate_budget(project, amount) needs approval

Each allocation stops the whole run with the question's full address. A person finds it in the
store's inbox (through a new store connection and a new agent tree, as another process would)
and approves it by id; the run continues inside the step where it stopped. The planner is not
asked again: the run counts its requests in each phase.

Offline by default (`ScriptedModel`s). With ``INTERLOCK_MODEL`` set to a model's name, that
model drives the same agents, whichever its provider::

    INTERLOCK_MODEL=openai:gpt-4o-mini python examples/budget_supervisor.py
    INTERLOCK_MODEL=anthropic:claude-sonnet-4-5 python examples/budget_supervisor.py
    INTERLOCK_MODEL=gemini:gemini-2.5-flash python examples/budget_supervisor.py
    INTERLOCK_MODEL=langchain:ollama:llama3.1 python examples/budget_supervisor.py

Each provider's SDK reads its key and endpoint from its own variables (``OPENAI_API_KEY`` and
``OPENAI_BASE_URL``, ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL``, ``GEMINI_API_KEY`` and
``GOOGLE_GEMINI_BASE_URL``). Without ``INTERLOCK_MODEL``, ``OPENAI_API_KEY`` or
``OPENAI_BASE_URL`` alone still selects an OpenAI-compatible model (``OPENAI_MODEL``, default
``gpt-4o-mini``).
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import anyio

from interlock import InterlockError, SqliteStore
from interlock.agents import (
    AgentEvent,
    AgentFinished,
    AgentInterrupt,
    ApprovalPolicy,
    Approve,
    AssistantMessage,
    AssistantTurn,
    ChatModel,
    Message,
    Runner,
    ScriptedModel,
    ToolAgent,
    ToolCall,
    ToolMessage,
    ToolResult,
    ToolSpec,
    Transfer,
    UserMessage,
    call,
    chat_model_from_env,
    plan_execute,
    supervisor,
    tool,
)

REQUEST: Final = "Fund the Q3 launch: ¥300000 for design and ¥500000 for ads."


@dataclass
class Ledger:
    """The outside world: the finance system the tool books allocations in."""

    booked: list[tuple[str, int]] = field(default_factory=list)


# -- the offline models ------------------------------------------------------------------------


def pm_reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str | ToolCall:
    """The project manager: hand the request over, then report what was allocated."""
    if isinstance(messages[-1], UserMessage):
        return call("transfer_to_budget")
    done = [
        m.content for m in messages if isinstance(m, AssistantMessage) and m.name == "allocator"
    ]
    return f"The budget is set: {' '.join(c for c in done if c)}"


_AMOUNTS: Final = re.compile(r"¥?(\d+) for (\w+)")


def planner_reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ToolCall:
    """The planner: one step per amount the request names."""
    request = next(m.content for m in messages if isinstance(m, UserMessage))
    steps = [f"Allocate {amount} to {project}" for amount, project in _AMOUNTS.findall(request)]
    return call("plan", {"steps": steps})


def allocator_reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str | ToolCall:
    """The allocator: book the step's amount, then say what happened."""
    last = messages[-1]
    if isinstance(last, UserMessage):
        step = re.search(r"Allocate (\d+) to (\w+)", last.content)
        assert step is not None, last.content
        return call("allocate_budget", {"project": step[2], "amount": int(step[1])})
    assert isinstance(last, ToolMessage)
    return last.content if last.status == "ok" else f"Not allocated: {last.content}"


# -- the agents --------------------------------------------------------------------------------


@dataclass
class Models:
    """The three models, kept to count their requests."""

    pm: ChatModel
    planner: ChatModel
    allocator: ChatModel


def openai_model() -> str | None:
    """The OpenAI-compatible model ``OPENAI_*`` asks for, if they name an endpoint or a key."""
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        return f"openai:{os.environ.get('OPENAI_MODEL', 'gpt-4o-mini')}"
    return None


def models() -> Models:
    """A real model for each agent when the environment names one, else the scripted ones."""
    fallback = openai_model()
    if os.environ.get("INTERLOCK_MODEL", "").strip() or fallback is not None:
        # INTERLOCK_MODEL, else the OPENAI_* model; the provider's package is imported only now.
        return Models(
            pm=chat_model_from_env(fallback),
            planner=chat_model_from_env(fallback),
            allocator=chat_model_from_env(fallback),
        )
    return Models(
        pm=ScriptedModel(pm_reply, name="pm"),
        planner=ScriptedModel(planner_reply, name="planner"),
        allocator=ScriptedModel(allocator_reply, name="allocator"),
    )


def build(m: Models, ledger: Ledger) -> ToolAgent:
    """pm over budget over allocator; the tool books into ``ledger``."""

    @tool
    def allocate_budget(project: str, amount: int) -> str:
        """Book an amount of the budget for a project.

        Args:
            project: The project's name.
            amount: How much, in yen.
        """
        ledger.booked.append((project, amount))
        return f"Allocated ¥{amount} to {project}."

    allocator = ToolAgent(
        "allocator",
        m.allocator,
        [allocate_budget],
        policy=ApprovalPolicy({"allocate_budget": "require_approval"}),
        system="Do the step you are given with allocate_budget, then say what you did.",
    )
    budget = plan_execute(
        m.planner, allocator, name="budget", description="Plans a budget and allocates it."
    )
    return supervisor(
        m.pm,
        [budget],
        name="pm",
        system="You are a project manager. Hand budget requests to the budget agent.",
    )


@asynccontextmanager
async def open_runner(db: Path, ledger: Ledger) -> AsyncIterator[tuple[Runner, Models]]:
    """A new store connection and a new agent tree on it (what a new process would build)."""
    m = models()
    async with AsyncExitStack() as stack:
        for model in (m.pm, m.planner, m.allocator):
            aclose = getattr(model, "aclose", None)
            if aclose is not None:
                stack.push_async_callback(aclose)
        store = await stack.enter_async_context(SqliteStore(db))
        yield Runner(build(m, ledger), store), m


def requests(m: Models) -> str:
    """How many requests each scripted model got in this phase."""
    counts = [
        f"{name} {len(model.requests)}"
        for name, model in (("pm", m.pm), ("planner", m.planner), ("allocator", m.allocator))
        if isinstance(model, ScriptedModel)
    ]
    return ", ".join(counts) if counts else "(not counted for a real model)"


# -- the run -----------------------------------------------------------------------------------


def show(event: AgentEvent) -> None:
    """Print one event of the run, readably."""
    if isinstance(event, Transfer):
        print(f"  {event.source} -> {event.target}")
    elif isinstance(event, AssistantTurn):
        for c in event.message.tool_calls:
            print(f"  {event.agent} calls {c.name}({c.arguments})")
        if event.message.content:
            print(f"  {event.agent}: {event.message.content}")
    elif isinstance(event, ToolResult):
        print(f"  {event.tool} -> {event.status}: {event.content}")
    elif isinstance(event, AgentInterrupt):
        print(f"  ? {event.interrupt.info['question']}")
        print(f"    address: {event.interrupt.address}")
        print(f"    agent: {event.agent}, tool: {event.tool}, call: {event.call_id}")
        print(f"    id: {event.interrupt.id}")


@dataclass(frozen=True, kw_only=True)
class Phase:
    """What one phase (one "process") saw."""

    status: str
    """Where the run stopped: ``interrupted`` while questions wait, then ``done``."""
    answer: str | None
    """The final answer, once done."""
    planner_requests: int | None
    """How often this phase asked the planner (None for a real model: not counted)."""


def phase(m: Models, finished: AgentFinished | None) -> Phase:
    assert finished is not None
    print(f"  model requests in this phase: {requests(m)}")
    counted = len(m.planner.requests) if isinstance(m.planner, ScriptedModel) else None
    return Phase(status=finished.result.status, answer=finished.answer, planner_requests=counted)


async def start(db: Path, ledger: Ledger, session: str) -> Phase:
    """Send the request."""
    async with open_runner(db, ledger) as (runner, m):
        async with runner.run(REQUEST, session=session) as events:
            async for event in events:
                show(event)
        return phase(m, events.finished)


async def approve_pending(db: Path, ledger: Ledger, session: str) -> Phase:
    """Find the questions in the inbox and approve them by id from the top."""
    async with open_runner(db, ledger) as (runner, m):
        pending = await runner.app.inbox(thread=session)
        for i in pending:
            print(f"  inbox: {i.info['tool']}({i.info['arguments']}), id {i.id}")
        decisions = {i.id: Approve() for i in pending}
        async with runner.resume(session, decisions, actor="cfo") as events:
            async for event in events:
                show(event)
        return phase(m, events.finished)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, default=Path("budget-supervisor.db"))
    args = parser.parse_args(argv)
    ledger = Ledger()
    session = f"budget-{secrets.token_hex(3)}"
    print(f"session {session} in {args.db}\n\nuser: {REQUEST}")
    try:
        first = last = anyio.run(start, args.db, ledger, session)
        after = 0
        while last.status == "interrupted":
            print("\napproving from the top, through a new Runner:")
            last = anyio.run(approve_pending, args.db, ledger, session)
            after += last.planner_requests or 0
    except (InterlockError, ImportError) as exc:  # ImportError: the model's extra is missing
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"\n{last.status}: {last.answer}")
    print(f"booked: {ledger.booked}")
    if first.planner_requests is not None:
        print(
            f"planner requests: {first.planner_requests} before the first question, {after} after"
        )
    return 0 if last.status == "done" else 1


if __name__ == "__main__":
    sys.exit(main())
