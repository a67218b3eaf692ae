"""One AG-UI run of an interlock agent: a new turn, or the answers to its questions and what
follows them, as a sequence of AG-UI events.

A run with ``resume`` entries answers the questions by id through `App.decide`, with the
caller's principal as the decider: each question's authority is checked and each is decided
exactly once (all of them, or, on a refusal, none: a refusal records nothing and is the run's
``RUN_ERROR``). The run then continues the thread (`App.stream` with ``resume=True``) and
streams what follows.

A question someone else decided first is not decided again: a ``CUSTOM`` event named
``interlock.already_decided`` says who decided it, when, and what; the run then continues the
thread if it still needs it (waiting, up to ``busy_timeout``, for whoever holds it) and ends
with what the thread looks like.

Invariant: every run ends with exactly one ``RUN_FINISHED`` or ``RUN_ERROR``, after its
``RUN_STARTED``.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import anyio
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    MessagesSnapshotEvent,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
)

from .._errors import (
    CheckpointNotFound,
    InterlockError,
    InterruptAlreadyResolved,
    InvalidId,
    InvalidResume,
    NotAuthorized,
    ThreadBusy,
    ThreadInterrupted,
    UnknownInterrupt,
)
from ..agents import conversation
from ..runtime import (
    App,
    Authority,
    Decision,
    EventStream,
    Interrupt,
    Question,
    RunResult,
    StreamMode,
    needs_confirmation,
)
from ..runtime import RunFinishedEvent as Finished
from ..server import Identity
from ._errors import RunRefused
from ._translate import Translator
from ._wire import (
    KEY,
    answer_of,
    decided_view,
    interrupt_of,
    messages_of,
    new_user_messages,
    plain,
)

__all__ = ["FOUR_EYES", "AGUIRun"]

log = logging.getLogger("interlock.agui")

FOUR_EYES: Final = Authority(not_starter=True)
"""The rule ``four_eyes=True`` adds to every decision made through the endpoint."""

_MODES: Final[tuple[StreamMode, ...]] = ("custom", "interrupts")


@dataclass(frozen=True, kw_only=True)
class AGUIRun:
    """One AG-UI run of ``app`` by ``identity``: iterate `events`."""

    app: App[Any]
    identity: Identity
    input: RunAgentInput
    four_eyes: bool = False
    """Keep the run's starter from deciding its questions (see `FOUR_EYES`)."""
    busy_timeout: float = 30.0
    """Seconds to wait for a thread someone else is continuing, once its question is decided."""

    @property
    def thread(self) -> str:
        """The interlock thread: the AG-UI ``threadId``."""
        return self.input.thread_id

    @property
    def nonce(self) -> str:
        """The idempotency key of this run's decisions: the same caller sending the same run
        again (a retry of a request whose answer was lost) finds them recorded, rather than
        deciding twice or being told someone decided first."""
        mine = f"{self.identity.name}\0{self.input.run_id}".encode()
        return "agui." + hashlib.sha256(mine).hexdigest()[:32]

    async def events(self) -> AsyncIterator[BaseEvent]:
        """The run's AG-UI events, from ``RUN_STARTED`` to ``RUN_FINISHED`` or ``RUN_ERROR``."""
        yield RunStartedEvent(thread_id=self.thread, run_id=self.input.run_id)
        try:
            async for event in self._events():
                yield event
        except RunRefused as exc:
            yield RunErrorEvent(message=str(exc), code=exc.code)
        except InterlockError as exc:
            # The thread stays at its last checkpoint; its record says how it ended.
            yield RunErrorEvent(message=f"{type(exc).__name__}: {exc}", code="run_failed")
        except Exception as exc:
            error_id = secrets.token_hex(8)
            log.error("AG-UI run failed (error id %s)", error_id, exc_info=exc)
            yield RunErrorEvent(
                message=f"the server failed (error id {error_id}); the server's log has the "
                "details under that id: report it to whoever runs the server",
                code="internal",
            )

    async def _events(self) -> AsyncIterator[BaseEvent]:
        who = self.identity
        if not who.can("approver"):
            raise RunRefused(
                "forbidden",
                f"{who.name} is a {who.role}: running an agent and answering its questions "
                "take the approver role",
            )
        if not who.sees_thread(self.thread):
            raise RunRefused(
                "out_of_scope",
                f"{who.name} may not act on thread {self.thread!r}: use a thread id within "
                "this identity's threads, or another identity",
            )
        source = self._resume(self.input.resume) if self.input.resume else self._start()
        async for event in source:
            yield event

    # -- a new turn ----------------------------------------------------------------------------

    async def _start(self) -> AsyncIterator[BaseEvent]:
        try:
            held = (await self.app.get_state(self.thread)).values or {}
        except CheckpointNotFound:
            held = {}
        except InvalidId as exc:
            raise RunRefused("invalid_input", f"threadId: {exc}") from exc
        known = conversation(held.get("messages") or ())
        new = new_user_messages(self.input.messages, known)
        if not new:
            raise RunRefused(
                "no_input",
                "this run brings no new user message and no resume entries: add the user's "
                "message, or answer the interrupts that ended the last run",
            )
        try:
            stream = self.app.stream(
                {"messages": new},
                thread=self.thread,
                modes=_MODES,
                metadata={"started_by": self.identity.name},
            )
        except InvalidId as exc:
            raise RunRefused("invalid_input", f"threadId: {exc}") from exc
        try:
            async for event in self._drain(stream, []):
                yield event
        except ThreadInterrupted as exc:
            raise RunRefused(
                "thread_interrupted",
                f"{exc}; answer them first: send their ids as resume entries",
            ) from exc

    # -- answers -------------------------------------------------------------------------------

    async def _resume(self, entries: Sequence[ResumeEntry]) -> AsyncIterator[BaseEvent]:
        answers: dict[str, Any] = {}
        seen: dict[str, str] = {}
        decided: list[dict[str, Any]] = []
        for entry in entries:
            question = await self._question(entry.interrupt_id)
            if question.status != "pending":
                if question.decision is None or question.decision.nonce != self.nonce:
                    decided.append(_settled(question))
                continue  # else this run's own decision, sent again
            answer = answer_of(entry, question.interrupt)
            shown = _mine(entry).get("payloadHash")
            if shown is not None:
                if shown != question.payload_hash:
                    raise RunRefused(
                        "question_changed",
                        f"interrupt {question.id} is not the question you were shown (its "
                        "payload hash differs): read it again and answer what it says now",
                    )
                seen[question.id] = shown
            if needs_confirmation(question.interrupt.info, answer) and not _mine(entry).get(
                "confirmed"
            ):
                raise RunRefused(
                    "confirmation_required",
                    f"interrupt {question.id} asks for a confirmation step before it is "
                    "approved: show the person what will run, and send the entry again with "
                    f'metadata {{"{KEY}": {{"confirmed": true}}}} once they confirm',
                )
            answers[question.id] = answer
        while answers:
            try:
                await self._decide(answers, seen)
                break
            except InterruptAlreadyResolved as exc:
                # Someone else's decision came first: tell who, and decide the rest.
                found = exc.resolved_value
                if isinstance(found, Decision):
                    decided.append(decided_view(found))
                else:
                    decided.append(_settled(await self._question(exc.interrupt_id)))
                answers.pop(exc.interrupt_id, None)
                seen.pop(exc.interrupt_id, None)
        async for event in self._continue(decided):
            yield event

    async def _question(self, interrupt_id: str) -> Question:
        """The question ``interrupt_id`` of this thread, in the caller's scope."""
        try:
            question = await self.app.question(interrupt_id)
        except InvalidId:
            question = None
        if (
            question is None
            or question.thread != self.thread
            or not self.identity.sees(question.thread, question.tool)
        ):
            raise RunRefused(
                "unknown_interrupt",
                f"thread {self.thread!r} has no interrupt {interrupt_id!r}: answer the ids "
                "the last run's interrupt outcome listed",
            )
        return question

    async def _decide(self, answers: dict[str, Any], seen: dict[str, str]) -> None:
        """Record the answers as the caller's decisions (`App.decide`), or refuse them all."""
        try:
            await self.app.decide(
                self.thread,
                dict(answers),
                actor=self.identity.principal(),
                nonce=self.nonce,
                seen=seen or None,
                require=FOUR_EYES if self.four_eyes else None,
            )
        except NotAuthorized as exc:
            if exc.rule == "starter":
                raise RunRefused("four_eyes", str(exc)) from exc
            raise RunRefused("not_authorized", str(exc)) from exc
        except InvalidResume as exc:
            raise RunRefused("invalid_answer", str(exc)) from exc
        except UnknownInterrupt as exc:
            raise RunRefused("unknown_interrupt", str(exc)) from exc
        except ThreadBusy as exc:
            raise RunRefused("thread_busy", f"{exc}; try again in a moment") from exc

    async def _continue(self, decided: list[dict[str, Any]]) -> AsyncIterator[BaseEvent]:
        """Continue the thread once its questions are decided (or end as it is)."""
        waited, delay = 0.0, 0.05
        while True:
            stream = self.app.stream(thread=self.thread, resume=True, modes=_MODES)
            try:
                async for event in self._drain(stream, decided):
                    yield event
                return
            except InvalidResume:
                # Questions still wait (a quorum's vote was recorded, a question was asked
                # again): nothing to continue; the thread is as it stands.
                snapshot = await self.app.get_state(self.thread)
                for view in decided:
                    yield CustomEvent(name="interlock.already_decided", value=view)
                for out in self._finish(
                    snapshot.values, snapshot.interrupts, "interrupted", decided
                ):
                    yield out
                return
            except ThreadBusy as exc:
                # Someone else continues the thread (a server's background after its own
                # decision, a worker): its events are not this stream's; its end is, once
                # it lets go.
                if waited >= self.busy_timeout:
                    raise RunRefused(
                        "thread_busy",
                        f"{exc}; it is still being continued after {self.busy_timeout:g} s: "
                        "run again without resume entries later to read where it is",
                    ) from exc
                await anyio.sleep(delay)
                waited += delay
                delay = min(delay * 2, 1.0)

    # -- the end of a run ------------------------------------------------------------------------

    async def _drain(
        self, stream: EventStream, decided: list[dict[str, Any]]
    ) -> AsyncIterator[BaseEvent]:
        translator = Translator()
        result: RunResult[Any] | None = None
        first = True
        async with stream as events:
            async for event in events:
                if first:
                    # The run has begun (a refusal comes before any event): tell who decided
                    # what was decided elsewhere, before what follows from it.
                    first = False
                    for view in decided:
                        yield CustomEvent(name="interlock.already_decided", value=view)
                if isinstance(event, Finished):
                    result = event.result
                for out in translator.translate(event):
                    yield out
        for out in translator.close():
            yield out
        assert result is not None  # a stream that ends without an error ends with it
        for out in self._finish(result.values, result.interrupts, result.status, decided):
            yield out

    def _finish(
        self,
        values: Any,
        interrupts: Sequence[Interrupt],
        status: str,
        decided: list[dict[str, Any]],
    ) -> list[BaseEvent]:
        """The events that end a run: the conversation, the state, and why it stopped."""
        values = values if isinstance(values, dict) else {}
        messages = messages_of(conversation(values.get("messages") or ()))
        state = {k: plain(v) for k, v in values.items() if k != "messages"}
        waiting = [i for i in interrupts if i.needs_answer]
        outcome: Any = None
        if waiting:
            outcome = RunFinishedInterruptOutcome(
                interrupts=[
                    interrupt_of(
                        i,
                        payload_hash=self.app.payload_hash(i),
                        authority=self.app.who_decides(i, four_eyes=self.four_eyes),
                    )
                    for i in waiting
                ]
            )
        elif status == "paused":
            outcome = RunFinishedCancelledOutcome()
        summary: dict[str, Any] = {"status": status}
        if decided:
            summary["alreadyDecided"] = decided
        return [
            MessagesSnapshotEvent(messages=messages),
            StateSnapshotEvent(snapshot=state),
            RunFinishedEvent(
                thread_id=self.thread,
                run_id=self.input.run_id,
                result=summary,
                outcome=outcome,
            ),
        ]


def _settled(question: Question) -> dict[str, Any]:
    """What the front-end is told of a question that is no longer pending."""
    if question.decision is not None:
        return decided_view(question.decision)
    return {
        "interruptId": question.id,
        "actor": None,
        "status": question.status,
        "message": f"interrupt {question.id} is {question.status}; there is nothing to decide",
    }


def _mine(entry: ResumeEntry) -> dict[str, Any]:
    """interlock's part of a resume entry's metadata: ``payloadHash`` (the question as the
    person saw it), ``confirmed`` (they went through its confirmation step)."""
    mine = (entry.metadata or {}).get(KEY)
    return mine if isinstance(mine, dict) else {}
