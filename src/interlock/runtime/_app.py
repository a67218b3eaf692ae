"""`App`: a compiled graph bound to a store — run, resume, inspect and branch threads."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, get_args

import anyio

from .._args import (
    check_choice,
    check_flag,
    check_id,
    check_ids,
    check_instance,
    check_keys,
    check_limit,
    check_names,
    check_options,
    check_seconds,
    check_seen,
    check_text,
    check_time,
)
from .._errors import (
    CheckpointNotFound,
    FencedOut,
    GraphDefinitionError,
    InterruptAlreadyResolved,
    InvalidResume,
    ResumeError,
    ThreadBusy,
    ThreadInterrupted,
)
from ..graph._channels import AppendChannel
from ..stores import AuditEntry, CheckpointRecord, MemoryStore, Resolution, Store
from ._context import TaskContext
from ._control import RunControl, RunHandle
from ._effects import EffectIO
from ._engine import ESCALATE, Level, new_id
from ._events import MODES, Event, EventStream, RunFinishedEvent, RunStartedEvent, StreamMode
from ._persist import Head, ThreadIO, cancellations, dropped_entry
from ._records import Address, Command, Decision, Interrupt, RunResult, Send, StateSnapshot
from ._resume import (
    Targets,
    check_targets,
    decide,
    decided_unrun,
    payload_hash,
    recorded_decision,
)
from ._runctx import LeasePolicy, Opened, RunCtx, Stale
from ._signals import InterruptSignal
from ._wire import level_from_wire, level_to_wire, subgraph_output

if TYPE_CHECKING:
    from ..graph._builder import CompiledGraph, Durability, Migration

__all__ = ["App", "InterruptHandler", "Targets"]

StateT = TypeVar("StateT")

InterruptHandler = Callable[[Interrupt], Awaitable[Any]]
"""An ``on_interrupt`` handler: receives a pending interrupt, returns its answer."""
OnPending = Literal["raise", "cancel"]
WARM_THREADS = 256


@dataclass(frozen=True, slots=True)
class _Call:
    """The options of one `App.run` or `App.resume` call."""

    interrupt_before: Sequence[str]
    interrupt_after: Sequence[str]
    on_interrupt: InterruptHandler | None
    durability: Durability
    metadata: Mapping[str, Any] | None
    emit: Callable[[Event], None] | None
    control: RunControl | None


class _Lost(Exception):
    """A decision's commit lost its compare-and-set; `App.decide` reads the thread again."""

    def __init__(self, error: ThreadBusy | InterruptAlreadyResolved) -> None:
        super().__init__(str(error))
        self.error = error


class App(Generic[StateT]):
    """A compiled graph bound to a store. Create it with `Graph.compile`.

    Async methods are the core; each has a ``*_sync`` twin for scripts.
    """

    def __init__(
        self,
        plan: CompiledGraph,
        *,
        store: Store | None,
        durability: Durability,
        recursion_limit: int,
        lease_ttl: float = 30.0,
        migrations: Mapping[str, Migration] | None = None,
    ) -> None:
        if durability not in ("sync", "exit"):
            raise GraphDefinitionError(f"durability must be 'sync' or 'exit', not {durability!r}")
        if not lease_ttl > 0:
            raise GraphDefinitionError(f"lease_ttl must be > 0 seconds, not {lease_ttl!r}")
        self.plan = plan
        self.store: Store = store if store is not None else MemoryStore()
        self.durability = durability
        self.recursion_limit = recursion_limit
        self.lease = LeasePolicy(owner=f"{socket.gethostname()}:{os.getpid()}", ttl=lease_ttl)
        self._io = ThreadIO(self.store, plan, migrations or {})
        # Levels this process committed last, by thread: the next call on the thread reuses
        # one when the store's head is still the checkpoint it wrote.
        self._warm: OrderedDict[str, tuple[Head, Level, set[str]]] = OrderedDict()

    def __repr__(self) -> str:
        return f"<App {self.plan.name!r} nodes={list(self.plan.nodes)} store={self.store!r}>"

    @property
    def fingerprint(self) -> str:
        """The graph's fingerprint, stored in every checkpoint it writes.

        Resuming a checkpoint written under another fingerprint raises `GraphChanged` unless
        ``compile(migrations={old_fingerprint: fn})`` says how to carry its state over.
        """
        return self.plan.fingerprint

    # -- running ------------------------------------------------------------------------------

    async def run(
        self,
        input: Any,
        *,
        thread: str,
        on_pending: OnPending = "raise",
        interrupt_before: Sequence[str] = (),
        interrupt_after: Sequence[str] = (),
        on_interrupt: InterruptHandler | None = None,
        durability: Durability | None = None,
        metadata: Mapping[str, Any] | None = None,
        emit: Callable[[Event], None] | None = None,
        control: RunControl | None = None,
    ) -> RunResult[StateT]:
        """Run the graph on a thread with new input until it finishes or stops.

        On a thread that already exists, the input is applied to its state through the reducers
        and the graph starts again from `START` (a new turn).

        Args:
            input: State updates (dict, or an instance of the state class).
            thread: The thread id.
            on_pending: A thread with pending interrupts, or decided ones whose tasks have not
                run yet, raises `ThreadInterrupted` (``"raise"``) or has them dropped on the
                record first (``"cancel"``: pending ones are cancelled, and the audit log gets
                a ``dropped`` entry naming the decided ones and their nodes).
            interrupt_before: Extra breakpoints for this run (``"sub/inner"`` reaches into a
                subgraph).
            interrupt_after: Same, after the node.
            on_interrupt: Answer interrupts in-process: awaited with each pending interrupt
                (after its checkpoint is committed); its return value is the answer.
            durability: Override the App's durability for this run.
            metadata: Stored with the checkpoints of this run.
            emit: Receives events as they happen (see `stream`).
            control: Lets a `RunHandle` pause the run (see `start`).
        """
        check_id(thread, "thread")
        check_choice(on_pending, "on_pending", get_args(OnPending), optional=False)
        check_options(
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            on_interrupt=on_interrupt,
            durability=durability,
            metadata=metadata,
            emit=emit,
        )
        check_instance(control, RunControl, "control", optional=True)
        call = _Call(
            interrupt_before,
            interrupt_after,
            on_interrupt,
            durability or self.durability,
            metadata,
            emit,
            control,
        )
        if emit is not None:
            emit(RunStartedEvent(thread=thread, resumed=False))
        # In "sync" mode the first thing a run does is commit its input, by compare-and-set on
        # the head: a cached (or assumed-new) view of the thread is verified by that commit, so
        # the read can be skipped.
        return await self._verified(
            thread,
            optimistic=call.durability == "sync",
            new=True,
            call=lambda opened: self._run(opened, input, thread, on_pending, call),
        )

    async def _verified(
        self,
        thread: str,
        *,
        optimistic: bool,
        new: bool,
        call: Callable[[Opened], Awaitable[RunResult[StateT]]],
    ) -> RunResult[StateT]:
        """Run ``call`` on the thread as `_open` finds it; once more from the store if stale."""
        try:
            return await call(await self._open(thread, optimistic=optimistic, new=new))
        except Stale:
            return await call(await self._open(thread, optimistic=False))

    async def _run(
        self, opened: Opened, input: Any, thread: str, on_pending: OnPending, call: _Call
    ) -> RunResult[StateT]:
        level = opened.level
        resolutions: list[Resolution] = []
        audit: list[AuditEntry] = []
        if level is None:
            level = Level(self.plan, thread=thread, lineage=new_id(), base=Address())
        else:
            # A failed run did continue its decided tasks; its leftovers go (decision 9).
            failed = opened.head is not None and opened.head.record.status == "failed"
            decided = {} if failed else decided_unrun(level)
            if level.pending or decided:
                if on_pending != "cancel":
                    ids = [*(r.id for r in level.pending), *decided]
                    opened.check(ThreadInterrupted(thread, ids, decided=list(decided)))
                resolutions = cancellations(r.id for r in level.pending)
                if decided and opened.head is not None:
                    audit.append(dropped_entry(decided, opened.head.record.id))
        level.start(self.plan.schema.values_of(input))
        ctx = self._prepare(level, thread, opened, call)
        if ctx.durability == "sync" or resolutions or audit:
            await ctx.commit(level, "input", resolutions, audit=audit)
        return await self._drive(level, ctx, call.on_interrupt)

    async def decide(
        self,
        thread: str,
        answers: Mapping[str, Any],
        *,
        actor: str | None = None,
        reason: str | None = None,
        nonce: str | None = None,
        seen: Mapping[str, str] | None = None,
    ) -> list[Decision]:
        """Record answers without continuing the thread; return the recorded decisions.

        Each answered interrupt leaves ``pending`` exactly once (compare-and-set); the tasks
        that wait on it run when someone continues the thread with ``app.resume(thread)``.

        Args:
            thread: The thread.
            answers: ``{interrupt_id_or_key: answer}``.
            actor: Who decides.
            reason: Why (kept with the decision).
            nonce: An idempotency key: sending the same decisions again with the same nonce
                returns the recorded ones instead of raising `InterruptAlreadyResolved`.
            seen: ``{interrupt_id: payload_hash}`` of the questions the person was shown (see
                `payload_hash`); a question that changed since is refused.

        Two deciders racing on one interrupt: one decision is recorded; the other caller reads
        the thread again and gets `InterruptAlreadyResolved` carrying it (or, having sent the
        same nonce, the recorded decisions back).

        Raises:
            ValueError: ``answers`` is empty.
            UnknownInterrupt, InterruptAlreadyResolved (carrying the recorded `Decision`),
            InvalidResume, CheckpointNotFound: Nothing was recorded.
            ThreadBusy: A run holds the thread (it is being continued) and has not answered
                these interrupts; nothing was recorded, try again once it stops.
        """
        check_id(thread, "thread")
        check_ids(answers, "answers")
        check_id(actor, "actor", optional=True)
        check_text(reason, "reason")
        check_id(nonce, "nonce", optional=True)
        check_seen(seen)
        if not answers:
            raise ValueError(
                "answers is empty: pass {interrupt_id_or_key: answer} for at least one pending "
                "interrupt (list them with app.inbox(thread=...))"
            )
        busy: ThreadBusy | None = None
        while True:
            opened = await self._open(thread, optimistic=False)
            if opened.level is None:
                raise CheckpointNotFound(thread)
            try:
                return await self._decide(opened, thread, answers, actor, reason, nonce, seen, busy)
            except _Lost as lost:
                # Someone wrote since the read: read again, and what they recorded decides
                # (the same decision again, or a refusal carrying theirs). A run holding the
                # lease only makes this wait when it left the targets pending.
                error = lost.error
                busy = error if isinstance(error, ThreadBusy) and error.holder else None

    async def _decide(
        self,
        opened: Opened,
        thread: str,
        answers: Mapping[str, Any],
        actor: str | None,
        reason: str | None,
        nonce: str | None,
        seen: Mapping[str, str] | None,
        busy: ThreadBusy | None,
    ) -> list[Decision]:
        """One attempt of `decide` on the thread as read; `_Lost` when its commit was refused.

        ``busy``: a run held the lease at the last attempt; raised once the targets are checked.
        """
        level = opened.level
        assert level is not None
        try:
            checked = await check_targets(self.store, self.plan.codec, level, thread, answers, {})
        except InterruptAlreadyResolved:
            replayed = await self._replayed(thread, answers, nonce)
            if replayed is None:
                raise
            return replayed
        by_id = {r.id: r for r in level.pending}
        for iid, shown in (seen or {}).items():
            r = by_id.get(iid)
            if r is not None and shown != payload_hash(self.plan.codec, r.interrupt.info):
                raise InvalidResume(
                    f"interrupt {iid} changed since it was shown; show it again and decide",
                    interrupt_id=iid,
                )
        if busy is not None:
            raise busy
        ctx = self._prepare(level, thread, opened, _Call((), (), None, "sync", None, None, None))
        resolutions, decisions = decide(
            self.plan.codec, level, checked, actor=actor, reason=reason, nonce=nonce
        )
        try:
            await ctx.commit(
                level, "resume", resolutions, actor=actor, final=True, decisions=decisions
            )
        except (ThreadBusy, InterruptAlreadyResolved) as exc:
            raise _Lost(exc) from exc
        self._keep_warm(ctx, level)
        return decisions

    async def _replayed(
        self, thread: str, answers: Mapping[str, Any], nonce: str | None
    ) -> list[Decision] | None:
        """The recorded decisions, when every target was already decided with ``nonce``."""
        if nonce is None:
            return None
        found: list[Decision] = []
        for target in answers:
            stored = await self.store.get_interrupt(target)
            decision = None if stored is None else recorded_decision(self.plan.codec, stored)
            if stored is None or stored.thread != thread or decision is None:
                return None
            if decision.nonce != nonce:
                return None
            found.append(decision)
        return found

    async def sweep(self, *, now: float | None = None, limit: int = 100) -> list[RunResult[StateT]]:
        """Resolve interrupts whose deadline passed by their ``on_timeout``; continue threads.

        ``"reject"`` (the default) answers False, ``timeout_default(v)`` answers ``v``,
        ``"escalate"`` asks the same question again as a new interrupt without a deadline.
        Each interrupt is marked ``expired`` by compare-and-set, so two sweepers never act on
        one twice. Returns the results of the threads it continued.

        Args:
            now: The time to compare deadlines with (default: the clock).
            limit: At most this many interrupts per call.
        """
        now = check_time(now, "now")
        check_limit(limit, "limit")
        now = time.time() if now is None else now
        rows = await self.store.pending(deadline_before=now, limit=limit)
        results: list[RunResult[StateT]] = []
        for thread in dict.fromkeys(r.thread for r in rows):
            due = {r.id for r in rows if r.thread == thread}
            try:
                results.append(await self._expire(thread, due))
            except (ThreadBusy, InterruptAlreadyResolved):
                continue  # another process acted on the thread; a later sweep looks again
        return results

    async def _expire(self, thread: str, due: set[str]) -> RunResult[StateT]:
        opened = await self._open(thread, optimistic=False)
        level = opened.level
        if level is None:
            raise CheckpointNotFound(thread)
        answers: dict[str, Any] = {}
        for r in level.pending:
            if r.id in due:
                policy = r.on_timeout or "reject"
                if policy == "escalate":
                    answers[r.id] = ESCALATE
                elif isinstance(policy, tuple | list) and policy[0] == "default":
                    answers[r.id] = policy[1]
                else:
                    answers[r.id] = False
        call = _Call((), (), None, self.durability, None, None, None)
        ctx = self._prepare(level, thread, opened, call)
        resolutions, decisions = decide(
            self.plan.codec,
            level,
            answers,
            actor="sweeper",
            reason="deadline passed",
            status="expired",
        )
        await ctx.commit(level, "resume", resolutions, actor="sweeper", decisions=decisions)
        return await self._drive(level, ctx, None)

    def payload_hash(self, interrupt: Interrupt) -> str:
        """The hash of an interrupt's question, to pass back as ``decide(seen=...)``."""
        check_instance(interrupt, Interrupt, "interrupt")
        return payload_hash(self.plan.codec, interrupt.info)

    def _prepare(self, level: Level, thread: str, opened: Opened, call: _Call) -> RunCtx:
        """Apply a call's options to the level; return the context that commits for it."""
        level.set_run_breakpoints(call.interrupt_before, call.interrupt_after)
        level.control = call.control
        level.effects = EffectIO(self.store, self.plan.codec)
        ctx = RunCtx(
            self._io,
            self.recursion_limit,
            thread,
            call.durability,
            call.metadata,
            call.emit,
            opened,
            self.lease,
        )
        level.effects.ctx = ctx
        return ctx

    async def resume(
        self,
        thread: str,
        targets: Targets | object = None,
        *,
        checkpoint_id: str | None = None,
        actor: str | None = None,
        reason: str | None = None,
        interrupt_before: Sequence[str] = (),
        interrupt_after: Sequence[str] = (),
        on_interrupt: InterruptHandler | None = None,
        durability: Durability | None = None,
        metadata: Mapping[str, Any] | None = None,
        emit: Callable[[Event], None] | None = None,
        control: RunControl | None = None,
    ) -> RunResult[StateT]:
        """Answer interrupts and continue the thread.

        Every target is checked before anything changes. The answers are committed (each
        interrupt leaves ``pending`` exactly once) before any task runs again; only the tasks
        that own the answered interrupts re-run.

        Args:
            thread: The thread.
            targets: ``{interrupt_id_or_key: answer}``; a `Command` (``resume=`` answers the
                single pending interrupt or is itself such a mapping; ``update=``/``goto=``
                edit the state / add tasks); None continues static and external pauses (and
                tasks left by a crash or a failure). Any other value is a bare answer to the
                single interrupt waiting for one (``app.resume(thread, True)``); a mapping is
                always read as ``{id_or_key: answer}``, so a dict answer goes in one. On a
                finished thread, ``app.resume(thread)`` writes nothing and returns its result.
            checkpoint_id: Resume from this past checkpoint instead of the latest (time
                travel). The thread branches there; the branch's interrupts get new ids, and
                the old ids (or keys) are accepted as targets.
            actor: Who decided (stored with the decision).
            reason: Why (stored with the decision).

        Raises:
            CheckpointNotFound, UnknownInterrupt, InvalidResume, GraphChanged: Nothing was
                changed.
            InterruptAlreadyResolved: A target was answered already (also when another
                caller answered it while this one was checking); carries the recorded
                `Decision`. Nothing was changed.
            ThreadBusy: Another executor holds or changed the thread; nothing was changed.
        """
        check_id(thread, "thread")
        check_keys(targets.resume if isinstance(targets, Command) else targets, "targets")
        check_id(checkpoint_id, "checkpoint_id", optional=True)
        check_id(actor, "actor", optional=True)
        check_text(reason, "reason")
        check_options(
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            on_interrupt=on_interrupt,
            durability=durability,
            metadata=metadata,
            emit=emit,
        )
        check_instance(control, RunControl, "control", optional=True)
        # The decision commit comes before any task runs; it verifies a cached view of the
        # thread by compare-and-set, so the read can be skipped (see `run`).
        if emit is not None:
            emit(RunStartedEvent(thread=thread, resumed=True))
        call = _Call(
            interrupt_before,
            interrupt_after,
            on_interrupt,
            durability or self.durability,
            metadata,
            emit,
            control,
        )
        return await self._verified(
            thread,
            optimistic=True,
            new=False,
            call=lambda opened: self._resume(
                opened, thread, targets, checkpoint_id, (actor, reason), call
            ),
        )

    async def _resume(
        self,
        opened: Opened,
        thread: str,
        targets: Targets | object,
        checkpoint_id: str | None,
        who: tuple[str | None, str | None],
        call: _Call,
    ) -> RunResult[StateT]:
        actor, reason = who
        head, level = opened.head, opened.level
        if head is None or level is None:
            raise CheckpointNotFound(thread)
        renamed: dict[str, str] = {}
        branch_from: Head | None = None
        if checkpoint_id is not None and checkpoint_id != head.record.id:
            branch_from = await self._io.get(thread, checkpoint_id)
            level, opened.known = await self._io.load(thread, branch_from)
            renamed = self._io.relineage(level, new_id())
        cmd = targets if isinstance(targets, Command) else None
        try:
            answers = await check_targets(
                self.store, self.plan.codec, level, thread, targets, renamed
            )
        except ResumeError as exc:
            opened.check(exc)
            raise
        runnable = {t.id for t in level.tasks} - level.blocked() - set(level.results)
        if not answers and not runnable and cmd is None and level.pending:
            opened.check(
                InvalidResume(
                    f"thread {thread!r} waits on {len(level.dynamic_pending())} interrupt(s) "
                    f"that need an answer "
                    f"({', '.join(r.id for r in level.dynamic_pending())}); "
                    "pass {id_or_key: answer} or Command(resume=...)"
                )
            )
        edits = cmd is not None and bool(cmd.update or cmd.goto)
        if not (answers or runnable or edits or level.pending or branch_from):
            # Finished: nothing to answer, nothing to run. Report the end as it is and write
            # nothing, so that repeating a resume is harmless (see decisions).
            if not opened.verified:
                raise Stale
            return self._finished(level, thread, opened, call)
        update = level.updates_of("resume", cmd.update) if cmd is not None and cmd.update else []
        ctx = self._prepare(level, thread, opened, call)
        try:
            if branch_from is not None:
                # The branch starts at the chosen checkpoint, whatever it waits on: the new
                # lineage's first checkpoint has it as parent, not the old head.
                ctx.parent = branch_from
                await ctx.commit(level, "fork", ())
            resolutions, decisions = decide(
                self.plan.codec, level, answers, actor=actor, reason=reason
            )
            if update:
                level.apply_writes(("resume", k, v) for k, v in update)
            if cmd is not None and cmd.goto:
                goto = cmd.goto
                level.add_goto([goto] if isinstance(goto, str | Send) else list(goto))
            await ctx.commit(level, "resume", resolutions, actor=actor, decisions=decisions)
        except ThreadBusy as exc:
            await ctx.release()  # the branch commit may have taken the lease
            if branch_from is None and not isinstance(exc, FencedOut):
                # Lost the compare-and-set: if someone answered these meanwhile, say what
                # they recorded rather than that the thread moved.
                await self._told(thread, targets)
            raise
        except BaseException:
            await ctx.release()
            raise
        return await self._drive(level, ctx, call.on_interrupt)

    async def _told(self, thread: str, targets: Targets | object) -> None:
        """Raise `InterruptAlreadyResolved` if a target was answered since this call read."""
        level = (await self._open(thread, optimistic=False)).level
        if level is not None:
            try:
                await check_targets(self.store, self.plan.codec, level, thread, targets, {})
            except InterruptAlreadyResolved:
                raise
            except ResumeError:
                return  # anything else: the thread moved, which the caller reports

    def _finished(
        self, level: Level, thread: str, opened: Opened, call: _Call
    ) -> RunResult[StateT]:
        """The result of a finished thread, as stored; nothing is written."""
        ctx = self._prepare(level, thread, opened, call)
        result: RunResult[StateT] = ctx.result(level)
        if call.emit is not None:
            call.emit(RunFinishedEvent(result=result))
        self._keep_warm(ctx, level)
        return result

    async def _open(self, thread: str, *, optimistic: bool, new: bool = False) -> Opened:
        """Get the thread's latest level: from this process's cache, or from the store.

        ``optimistic`` returns the cached level without reading the store (and with ``new``,
        when nothing is cached, assumes a new thread); the caller's first commit verifies that
        view by compare-and-set.
        """
        warm = self._warm.pop(thread, None)
        if optimistic and warm is not None:
            warm[1].steps_taken = 0
            return Opened(*warm, verified=False)
        if optimistic and new:
            return Opened(None, None, set(), verified=False)
        head = await self._io.head(thread)
        if head is None:
            return Opened(None, None, set(), verified=True)
        if warm is not None and warm[0].record.id == head.record.id:
            # Nobody wrote since this process committed it: skip decoding the delta chain.
            warm[1].steps_taken = 0
            return Opened(*warm, verified=True)
        level, known = await self._io.load(thread, head)
        return Opened(head, level, known, verified=True)

    def _keep_warm(self, ctx: RunCtx, level: Level) -> None:
        if ctx.head is None:
            return
        self._warm[ctx.thread] = (ctx.head, level, ctx.known)
        while len(self._warm) > WARM_THREADS:
            self._warm.popitem(last=False)

    async def _drive(
        self, level: Level, ctx: RunCtx, on_interrupt: InterruptHandler | None
    ) -> RunResult[StateT]:
        while True:
            result = await ctx.advance(level)
            if on_interrupt is None or result.status != "interrupted":
                self._keep_warm(ctx, level)
                return result
            answers: dict[str, Any] = {}
            for i in result.interrupts:
                if i.kind in ("dynamic", "reconcile"):
                    answers[i.id] = await on_interrupt(i)
            # Same checks and commit as App.resume, on the live level.
            checked = await check_targets(
                self.store, self.plan.codec, level, ctx.thread, answers, {}
            )
            resolutions, decisions = decide(self.plan.codec, level, checked)
            await ctx.commit(level, "resume", resolutions, decisions=decisions)

    def start(
        self,
        input: Any = None,
        *,
        thread: str,
        resume: Targets | bool = False,
        poll_interval: float | None = 0.5,
        **kwargs: Any,
    ) -> RunHandle:
        """Run (or, with ``resume=``, resume) in the background of an ``async with`` block.

        The handle can pause the run from outside: ``await handle.pause()`` stops it at the
        next superstep boundary (running tasks finish; nothing re-runs on resume);
        ``await handle.pause(timeout=s)`` cancels tasks still running after ``s`` seconds
        (they re-run from their saved inputs on resume; finished siblings keep their results).
        The pause is an `Interrupt` of kind ``external``; ``app.resume(thread)`` continues.

        Another process can pause the run through the store with `request_pause`: the run
        looks at every superstep boundary, and every ``poll_interval`` seconds while a task
        runs (for forced requests). None stops the polling between boundaries.

        Example::

            async with app.start({"order": 42}, thread="t") as handle:
                paused = await handle.pause(timeout=5)
        """
        check_id(thread, "thread")
        check_keys(resume.resume if isinstance(resume, Command) else resume, "resume")
        check_seconds(poll_interval, "poll_interval")

        async def begin(control: RunControl) -> RunResult[StateT]:
            if resume is False:
                return await self.run(input, thread=thread, control=control, **kwargs)
            targets = None if resume is True else resume
            return await self.resume(thread, targets, control=control, **kwargs)

        return RunHandle(
            begin,
            remote=lambda: self.store.take_pause_request(thread),
            poll_interval=poll_interval,
        )

    async def request_pause(self, thread: str, *, forced: bool = False) -> bool:
        """Ask whichever process runs ``thread`` (started with `start`) to pause it.

        Planned: it stops at its next superstep boundary. Forced: running tasks are also
        cancelled (they re-run on resume). Returns False when the thread does not exist. A
        request for a thread that is not running waits for the next run that looks.
        """
        check_id(thread, "thread")
        check_flag(forced, "forced")
        return await self.store.request_pause(thread, forced=forced)

    # -- subgraphs ------------------------------------------------------------------------------

    async def run_nested(
        self, arg: Any, ctx: TaskContext, address: Address, parent: Level
    ) -> dict[str, Any] | None:
        """Run this App as a subgraph inside a parent task (engine use)."""
        where = str(address)
        saved = ctx.scratch.children.get(where)
        if saved is not None:
            level = level_from_wire(self.plan, saved, thread=ctx.thread, lineage=ctx.lineage)
        else:
            level = Level(self.plan, thread=ctx.thread, lineage=ctx.lineage, base=address)
            level.start(self.plan.schema.values_of(arg))
            level.origin = {
                k: len(c.value) for k, c in level.channels.items() if isinstance(c, AppendChannel)
            }
        level.base = address
        level.track_writes = True
        task = next(t for t in parent.tasks if t.id == ctx.task_id)
        level.set_run_breakpoints(*parent.child_breakpoints(task.node))
        level.control = parent.control
        level.effects = parent.effects
        status = await level.run(on_step=None, limit=self.recursion_limit)
        if status == "done":
            ctx.scratch.children.pop(where, None)
            return subgraph_output(level, parent.plan.schema.names)
        ctx.scratch.children[where] = level_to_wire(level, full=True)
        raise InterruptSignal(level.pending)

    # -- reading ---------------------------------------------------------------------------------

    async def inbox(
        self,
        *,
        thread: str | None = None,
        key: str | None = None,
        tool: str | None = None,
        older_than: float | None = None,
        limit: int = 100,
        after: str | None = None,
        deadline_before: float | None = None,
    ) -> list[Interrupt]:
        """Return pending interrupts across threads, oldest first, through the store's index.

        The cost grows with the number returned, not with the number of threads. Page with
        ``after=page[-1].id``. Each `Interrupt` carries its thread, so it can be answered with
        ``app.resume(i.thread, {i.id: answer})``. Filters: ``thread``, ``key``, ``tool`` (the
        tool a call waits on), ``older_than`` (raised before this Unix time),
        ``deadline_before``.
        """
        check_id(thread, "thread", optional=True)
        check_id(key, "key", optional=True)
        check_id(tool, "tool", optional=True)
        older_than = check_time(older_than, "older_than")
        check_limit(limit, "limit")
        check_id(after, "after", optional=True)
        deadline_before = check_time(deadline_before, "deadline_before")
        rows = await self.store.pending(
            thread=thread,
            key=key,
            tool=tool,
            older_than=older_than,
            limit=limit,
            after=after,
            deadline_before=deadline_before,
        )
        return self._io.interrupts_of(rows)

    async def get_state(
        self, thread: str, checkpoint_id: str | None = None
    ) -> StateSnapshot[StateT]:
        """Return the thread's state at its latest (or the given) checkpoint."""
        check_id(thread, "thread")
        check_id(checkpoint_id, "checkpoint_id", optional=True)
        head = await self._io.get(thread, checkpoint_id)
        level, _ = await self._io.load(thread, head)
        return self._snapshot(level, head.record, head.meta)

    async def history(
        self, thread: str, *, limit: int = 20, before: str | None = None
    ) -> list[StateSnapshot[StateT]]:
        """Return up to ``limit`` snapshots older than checkpoint ``before``, newest first.

        Page with ``before=page[-1].checkpoint_id``. Each page reads only its own checkpoints
        and their delta chains; the whole history is never loaded at once.
        """
        check_id(thread, "thread")
        check_limit(limit, "limit")
        check_id(before, "before", optional=True)
        before_seq = None
        if before is not None:
            before_seq = (await self._io.get(thread, before)).record.seq
        records = await self.store.list_checkpoints(thread, before_seq=before_seq, limit=limit)
        if not records and before is None and await self.store.get_thread(thread) is None:
            raise CheckpointNotFound(thread)
        loaded = await self._io.load_many(thread, records)
        return [
            self._snapshot(level, rec, meta)
            for (level, meta), rec in zip(loaded, records, strict=True)
        ]

    def _snapshot(
        self, level: Level, record: CheckpointRecord, meta: dict[str, Any]
    ) -> StateSnapshot[StateT]:
        blocked = level.blocked()
        return StateSnapshot(
            thread=record.thread,
            checkpoint_id=record.id,
            parent_id=record.parent_id,
            step=record.step,
            status=record.status,
            source=record.source,
            created_at=record.created_at,
            state=level.detached_view(),
            values=level.values(),
            next=tuple(t.node for t in level.tasks if t.id not in level.results or t.id in blocked),
            interrupts=[r.interrupt for r in level.pending],
            metadata=meta,
        )

    # -- editing -----------------------------------------------------------------------------------

    async def update_state(
        self,
        thread: str,
        values: Any,
        *,
        as_node: str | None = None,
        on_pending: OnPending = "raise",
        actor: str | None = None,
    ) -> str:
        """Edit a thread's state; return the new checkpoint id.

        Values go through the reducers as if ``as_node`` wrote them. Without ``as_node`` the
        planned tasks and pending interrupts stay as they are (edit, then resume); with it, the
        next tasks become that node's successors. The edit goes to the audit log with
        ``actor``.
        """
        check_id(thread, "thread")
        check_id(as_node, "as_node", optional=True)
        check_choice(on_pending, "on_pending", get_args(OnPending), optional=False)
        check_id(actor, "actor", optional=True)
        head = await self._io.head(thread)
        if head is None:
            raise CheckpointNotFound(thread)
        level, known = await self._io.load(thread, head)
        resolutions: list[Resolution] = []
        audit: list[AuditEntry] = []
        if as_node is not None:
            if as_node not in self.plan.nodes:
                raise GraphDefinitionError(f"as_node={as_node!r} is not a node of the graph")
            # The next tasks are replaced: decided ones would go unrun, as with new input.
            decided = {} if head.record.status == "failed" else decided_unrun(level)
            if level.pending or decided:
                if on_pending != "cancel":
                    ids = [*(r.id for r in level.pending), *decided]
                    raise ThreadInterrupted(thread, ids, decided=list(decided))
                resolutions = cancellations(r.id for r in level.pending)
                level.pending = []
                if decided:
                    audit.append(dropped_entry(decided, head.record.id, actor))
        writer = as_node or "update"
        level.apply_writes((writer, k, v) for k, v in level.updates_of(writer, values))
        if as_node is not None:
            level.results, level.scratch = {}, {}
            level.plan_after(as_node)
        ctx = RunCtx(
            self._io,
            self.recursion_limit,
            thread,
            "sync",
            None,
            None,
            Opened(head, level, known),
            self.lease,
        )
        return await ctx.commit(
            level,
            "update",
            resolutions,
            actor=actor,
            final=True,
            metadata={"as_node": as_node},
            audit=audit,
        )

    async def fork(self, thread: str, checkpoint_id: str | None, new_thread: str) -> str:
        """Copy a thread's state at a checkpoint into a new thread; return its checkpoint id.

        Pending interrupts are copied with new ids (resume the new thread by the new ids or by
        key); tasks waiting inside subgraphs keep their progress.
        """
        check_id(thread, "thread")
        check_id(checkpoint_id, "checkpoint_id", optional=True)
        check_id(new_thread, "new_thread")
        source = await self._io.get(thread, checkpoint_id)
        level, _ = await self._io.load(thread, source)
        if await self._io.head(new_thread) is not None:
            raise GraphDefinitionError(f"thread {new_thread!r} already exists; pick a new id")
        level.thread = new_thread
        self._io.relineage(level, new_id())
        ctx = RunCtx(
            self._io,
            self.recursion_limit,
            new_thread,
            "sync",
            None,
            None,
            Opened(None, level, set()),
            self.lease,
        )
        return await ctx.commit(level, "fork", (), final=True)

    # -- streaming ------------------------------------------------------------------------

    def stream(
        self,
        input: Any = None,
        *,
        thread: str,
        resume: Targets | bool = False,
        modes: Sequence[StreamMode] | None = None,
        **kwargs: Any,
    ) -> EventStream:
        """Run (or, with ``resume=``, resume) and read its events as they happen.

        The run belongs to an ``async with`` block::

            async with app.stream({"order": 42}, thread="t") as events:
                async for event in events:
                    ...

        Events, in order: `RunStartedEvent`; per superstep `StepEvent`, `ChunkEvent`s of
        streaming nodes, `NodeOutputEvent`s, `StepFinishedEvent`, `CheckpointEvent`;
        `InterruptEvent`s (only after their checkpoint is committed); a final
        `RunFinishedEvent` when the run stops. ``modes`` picks the others: ``"run"``,
        ``"steps"``, ``"updates"``, ``"chunks"``, ``"checkpoints"``, ``"interrupts"``
        (default: all). A failed run ends the iteration with the error `run` would raise;
        leaving the block early cancels the run, which stays resumable (see `EventStream`).
        """
        check_id(thread, "thread")
        check_keys(resume.resume if isinstance(resume, Command) else resume, "resume")
        check_names(modes, "modes", optional=True)
        unknown = [m for m in modes or () if m not in MODES]
        if unknown:
            raise GraphDefinitionError(f"unknown stream modes {unknown}; choose from {list(MODES)}")
        kinds = {"finished"}.union(*(MODES[m] for m in modes or MODES))

        async def start(emit: Callable[[Event], None]) -> RunResult[StateT]:
            if resume is False:
                return await self.run(input, thread=thread, emit=emit, **kwargs)
            targets = None if resume is True else resume
            return await self.resume(thread, targets, emit=emit, **kwargs)

        return EventStream(start, kinds)

    # -- sync twins -----------------------------------------------------------------------
    # Each starts an event loop of its own, which cannot happen inside a running one (a
    # notebook cell, an async web handler): `_blocking` says so and names the async method.

    def run_sync(self, input: Any, *, thread: str, **kwargs: Any) -> RunResult[StateT]:
        """`run` for scripts (starts an event loop).

        Raises:
            GraphDefinitionError: Called inside a running event loop; ``await app.run(...)``.
        """
        return _blocking("run", lambda: self.run(input, thread=thread, **kwargs))

    def resume_sync(self, thread: str, targets: Targets = None, **kwargs: Any) -> RunResult[StateT]:
        """`resume` for scripts (starts an event loop)."""
        return _blocking("resume", lambda: self.resume(thread, targets, **kwargs))

    def get_state_sync(
        self, thread: str, checkpoint_id: str | None = None
    ) -> StateSnapshot[StateT]:
        """`get_state` for scripts (starts an event loop)."""
        return _blocking("get_state", lambda: self.get_state(thread, checkpoint_id))

    def history_sync(self, thread: str, **kwargs: Any) -> list[StateSnapshot[StateT]]:
        """`history` for scripts (starts an event loop)."""
        return _blocking("history", lambda: self.history(thread, **kwargs))

    def update_state_sync(self, thread: str, values: Any, **kwargs: Any) -> str:
        """`update_state` for scripts (starts an event loop)."""
        return _blocking("update_state", lambda: self.update_state(thread, values, **kwargs))

    def fork_sync(self, thread: str, checkpoint_id: str | None, new_thread: str) -> str:
        """`fork` for scripts (starts an event loop)."""
        return _blocking("fork", lambda: self.fork(thread, checkpoint_id, new_thread))


_T = TypeVar("_T")


def _blocking(method: str, call: Callable[[], Awaitable[_T]]) -> _T:
    """Run ``call`` in an event loop of its own, or say why it cannot and what to do instead."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass  # none running: the usual case, and not the context of what `call` raises
    else:
        raise GraphDefinitionError(
            f"App.{method}_sync() cannot run inside a running event loop (a notebook cell, an "
            f"async function): use `await app.{method}(...)` there instead"
        )
    return anyio.run(call)
