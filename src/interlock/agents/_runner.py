"""`Runner`: run an agent on a store, session by session, and read what it does as events.

A session is a thread: ``runner.run(messages, session="s")`` starts (or continues) the
conversation, ``runner.resume("s", decisions)`` answers the questions it stopped on. Both are
``async with`` blocks that yield `AgentEvent`s; an `AgentInterrupt` is yielded only after the
checkpoint that holds it is committed, so a question a person sees is always durable.

Example::

    runner = Runner(agent, SqliteStore("agents.db"))
    async with runner.run("run echo hello", session="s1") as events:
        async for event in events:
            print(event)
    async with runner.resume("s1", {interrupt_id: Approve()}) as events:
        async for event in events:
            ...
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Literal

import msgspec

from .._args import check_id
from ..runtime import (
    App,
    Command,
    CustomEvent,
    EventStream,
    InterruptEvent,
    Price,
    RunFinishedEvent,
    RunResult,
)
from ..stores import Store
from ._agent import Agent, AgentState
from ._events import AgentEvent, AgentFinished, AgentInterrupt, agent_view
from ._messages import (
    ConversationItem,
    Message,
    RemoveMessage,
    ReplaceMessage,
    conversation,
    to_messages,
)

__all__ = ["AgentStream", "Runner"]

_AGENT_EVENTS = tuple(AgentEvent.__args__)


class AgentStream:
    """The events of one agent run; an ``async with`` block owns the run (see `EventStream`).

    Leaving the block early cancels the run: the session stays at its last checkpoint and
    ``runner.resume(session)`` continues it.
    """

    def __init__(self, stream: EventStream) -> None:
        self._stream = stream
        self.finished: AgentFinished | None = None
        """The last event, once it was read."""

    async def __aenter__(self) -> AgentStream:
        await self._stream.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._stream.__aexit__(exc_type, exc, tb)

    def __aiter__(self) -> AgentStream:
        self._stream.__aiter__()  # refuses iteration outside the block, with the reason
        return self

    async def __anext__(self) -> AgentEvent:
        while True:
            event = await self._stream.__anext__()
            if isinstance(event, CustomEvent):
                if isinstance(event.data, _AGENT_EVENTS):
                    return event.data  # type: ignore[no-any-return]
                continue
            if isinstance(event, InterruptEvent):
                agent, tool, call_id = agent_view(event.interrupt)
                return AgentInterrupt(
                    interrupt=event.interrupt, agent=agent, tool=tool, call_id=call_id
                )
            if isinstance(event, RunFinishedEvent):
                self.finished = finished(event.result)
                return self.finished


def finished(result: RunResult[Any]) -> AgentFinished:
    """The `AgentFinished` event of a run's result."""
    items = (result.values or {}).get("messages") or ()
    return AgentFinished(result=result, messages=tuple(conversation(items)))


Decisions = Mapping[str, Any]
"""``{interrupt_id_or_key: decision}``: `Approve()`, `Reject(message)`, `Edit(arguments)`,
`Respond(content)`, their plain-JSON forms, or any answer the interrupt's schema accepts."""


class Runner:
    """Runs one agent on one store, a session (thread) per conversation.

    Args:
        agent: The agent.
        store: Where sessions are kept (default: a new `MemoryStore`).
        durability: ``"sync"`` commits each step; ``"exit"`` only when the run stops.
        lease_ttl: Seconds a run's lease on its session outlives the run's last sign of life.
        recursion_limit: Most supersteps one call may take (default: what the agent needs).
        prices: ``{model: Price}``: what each model costs, so that usage has a cost.
    """

    def __init__(
        self,
        agent: Agent,
        store: Store | None = None,
        *,
        durability: Literal["sync", "exit"] = "sync",
        lease_ttl: float = 30.0,
        recursion_limit: int | None = None,
        prices: Mapping[str, Price] | None = None,
    ) -> None:
        if not isinstance(agent, Agent):
            raise TypeError(f"Runner needs an Agent, not {type(agent).__name__}")
        self.agent = agent
        self.app: App[AgentState] = agent.compile(
            store=store,
            durability=durability,
            lease_ttl=lease_ttl,
            recursion_limit=recursion_limit,
            prices=prices,
        )
        """The compiled agent (for the full thread API: history, fork, inbox...)."""

    def __repr__(self) -> str:
        return f"<Runner {self.agent!r} on {self.app.store!r}>"

    def run(
        self,
        messages: str | Message | Mapping[str, Any] | Sequence[Any],
        *,
        session: str,
        on_pending: Literal["raise", "cancel"] = "raise",
    ) -> AgentStream:
        """Add messages to the session's conversation and run the agent on it.

        Args:
            messages: A string (the user's message), a message, an OpenAI-shaped dict, or a
                list of them.
            session: The conversation's id (a thread of the store).
            on_pending: If the session still has questions waiting: ``"raise"``
                (`ThreadInterrupted`) or ``"cancel"`` them on the record.
        """
        check_id(session, "session")
        items = to_messages(messages)
        stream = self.app.stream(
            {"messages": items},
            thread=session,
            modes=["custom", "interrupts"],
            on_pending=on_pending,
        )
        return AgentStream(stream)

    def resume(
        self,
        session: str,
        decisions: Decisions | None = None,
        *,
        edits: Sequence[ReplaceMessage | RemoveMessage] = (),
        actor: str | None = None,
        reason: str | None = None,
    ) -> AgentStream:
        """Answer the session's questions and continue it.

        Args:
            session: The conversation's id.
            decisions: ``{interrupt_id_or_key: decision}`` (see `Decisions`); None continues a
                paused session.
            edits: Changes to the conversation (`ReplaceMessage`, `RemoveMessage`), applied in
                the same commit as the decisions, before the agent continues.
            actor: Who decides (recorded in the audit log).
            reason: Why (recorded with each decision).
        """
        check_id(session, "session")
        if decisions is not None and not isinstance(decisions, Mapping):
            raise TypeError(
                "decisions must be a mapping {interrupt_id_or_key: decision}, not "
                f"{type(decisions).__name__}"
            )
        targets: Any = _plain(decisions)
        if edits:
            bad = [e for e in edits if not isinstance(e, ReplaceMessage | RemoveMessage)]
            if bad or isinstance(edits, str | bytes):
                raise TypeError("edits must be a list of ReplaceMessage or RemoveMessage")
            update: dict[str, list[ConversationItem]] = {"messages": list(edits)}
            targets = Command(resume=targets or {}, update=update)
        stream = self.app.stream(
            thread=session,
            resume=targets if targets is not None else True,
            modes=["custom", "interrupts"],
            actor=actor,
            reason=reason,
        )
        return AgentStream(stream)

    async def invoke(
        self,
        messages: str | Message | Mapping[str, Any] | Sequence[Any],
        *,
        session: str,
        on_pending: Literal["raise", "cancel"] = "raise",
    ) -> AgentFinished:
        """Run without reading events (see `run`); return the last one."""
        async with self.run(messages, session=session, on_pending=on_pending) as events:
            async for _ in events:
                pass
        assert events.finished is not None
        return events.finished

    async def decide(
        self, session: str, decisions: Decisions | None = None, **kwargs: Any
    ) -> AgentFinished:
        """Resume without reading events (see `resume`); return the last one."""
        async with self.resume(session, decisions, **kwargs) as events:
            async for _ in events:
                pass
        assert events.finished is not None
        return events.finished

    async def messages(self, session: str) -> list[Message]:
        """The session's conversation as the model sees it (edits folded in)."""
        snapshot = await self.app.get_state(session)
        return conversation((snapshot.values or {}).get("messages") or ())


def _plain(decisions: Decisions | None) -> dict[str, Any] | None:
    """Decisions as stored answers: typed forms become their plain-JSON forms."""
    if decisions is None:
        return None
    out: dict[str, Any] = {}
    for key, value in decisions.items():
        if isinstance(value, msgspec.Struct):
            value = msgspec.to_builtins(value)
        out[key] = value
    return out
