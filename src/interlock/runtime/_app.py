"""`App`: a compiled graph bound to a store — run, resume, inspect and branch threads."""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar, get_args

from .._args import (
    check_choice,
    check_flag,
    check_id,
    check_ids,
    check_instance,
    check_keys,
    check_limit,
    check_name,
    check_names,
    check_options,
    check_seconds,
    check_seen,
    check_text,
    check_time,
)
from .._errors import GraphDefinitionError
from .._lazy import lazy_asyncio, lazy_module
from ..graph._builder import CompiledGraph, Durability, Migration
from ..graph._draw import Mark
from ..stores import CheckpointStatus, MemoryStore, PendingFilter, Store
from . import _failures, _threads
from ._authority import (
    Authority,
    Decider,
    Principal,
    authority_of,
    decider_of,
    merge_authority,
)
from ._calls import CallOptions, Calls, InterruptHandler, OnPending
from ._continuation import Continuation, Continuer
from ._control import RunControl, RunHandle
from ._engine import remember
from ._events import MODES, Event, EventStream, RunStartedEvent, StreamMode
from ._observe import CallScope, RunWatch
from ._persist import ThreadIO
from ._reader import Question, Reader, ThreadSummary
from ._records import Command, Decision, Interrupt, RunResult, StateSnapshot
from ._resume import Targets
from ._runctx import LeasePolicy
from ._usage import Price, check_prices

if TYPE_CHECKING:
    import asyncio
    import socket

    import anyio
else:  # imported by the first call that needs it, not by `import interlock`
    asyncio = lazy_asyncio(globals())
    socket = lazy_module("socket", globals())
    anyio = lazy_module("anyio", globals())

__all__ = ["App", "InterruptHandler", "Targets"]

StateT = TypeVar("StateT")


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
        authority: Authority | None = None,
        prices: Mapping[str, Price] | None = None,
    ) -> None:
        if durability not in get_args(Durability):
            raise GraphDefinitionError(f"durability must be 'sync' or 'exit', not {durability!r}")
        if not lease_ttl > 0:
            raise GraphDefinitionError(f"lease_ttl must be > 0 seconds, not {lease_ttl!r}")
        self.durability = durability
        """The default of each call's ``durability=``."""
        self.authority = authority_of(authority)
        """Rules every question's decision must also meet (`Graph.compile`'s ``authority``)."""
        remember(plan)  # a run may find this graph's levels stored inside another's task
        bound = store if store is not None else MemoryStore()
        self._calls: Calls[StateT] = Calls(
            plan,
            store=bound,
            io=ThreadIO(bound, plan, migrations or {}),
            lease=LeasePolicy(owner=f"{socket.gethostname()}:{os.getpid()}", ttl=lease_ttl),
            recursion_limit=recursion_limit,
            prices=check_prices(prices),
        )
        self._reader = Reader(bound, plan.codec)
        self._continuation = Continuation(bound)

    @property
    def plan(self) -> CompiledGraph:
        """The compiled graph this App runs."""
        return self._calls.plan

    @property
    def store(self) -> Store:
        """Where the App's checkpoints, interrupts and audit log go."""
        return self._calls.store

    @property
    def recursion_limit(self) -> int:
        """Most supersteps one call may take."""
        return self._calls.recursion_limit

    @property
    def lease(self) -> LeasePolicy:
        """How the App's calls hold their threads' leases."""
        return self._calls.lease

    @property
    def reader(self) -> Reader:
        """Reads questions and checkpoints' metadata from the App's store, with its codec."""
        return self._reader

    def __repr__(self) -> str:
        return f"<App {self.plan.name!r} nodes={list(self.plan.nodes)} store={self.store!r}>"

    def draw(
        self,
        *,
        marks: Mapping[str, Mark] | None = None,
        show_tool: Callable[[str], bool] | None = None,
    ) -> str:
        """The App's graph as Mermaid text, to paste into any Mermaid viewer.

        Nodes, edges, conditional edges with their labels, breakpoints, and the graphs nested
        inside nodes (subgraphs, an agent's children, a tools node's gated tools, agents
        offered as tools): see `CompiledGraph.draw`. ``marks`` (node path → `Mark`) show
        where a thread stands; ``show_tool`` picks the tools shown, by name.
        ``interlock graph --app module:attr`` prints it.
        """
        return self.plan.draw(marks=marks, show_tool=show_tool)

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
            thread: The thread id: printable text on one line, since notifications and logs
                show it (a control character, line break or bidirectional control raises
                `InvalidId`). A thread stored before this rule is still read, decided and
                resumed; fork it to a new id to give it new input.
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
        check_name(thread, "thread")
        check_choice(on_pending, "on_pending", get_args(OnPending), optional=False)
        options = self._options(
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            on_interrupt=on_interrupt,
            durability=durability,
            metadata=metadata,
            emit=emit,
            control=control,
        )
        if emit is not None:
            emit(RunStartedEvent(thread=thread, resumed=False))
        # In "sync" mode the first thing a run does is commit its input, by compare-and-set on
        # the head: a cached (or assumed-new) view of the thread is verified by that commit, so
        # the read can be skipped.
        with RunWatch(thread, self._calls.plan.name, resumed=False) as watch:
            return watch.stopped(
                await self._calls.verified(
                    thread,
                    optimistic=options.durability == "sync",
                    new=True,
                    call=lambda opened: self._calls.run(
                        watch.opened(opened), input, thread, on_pending, options
                    ),
                )
            )

    def _decider(
        self,
        actor: str | Principal | None,
        reason: str | None,
        override: str | None,
        require: Authority | None,
    ) -> Decider:
        """Who decides, checked: a principal or a name, and the rules added for this call."""
        if not isinstance(actor, Principal):
            check_name(actor, "actor", optional=True)
        check_text(reason, "reason")
        check_text(override, "override")
        return decider_of(
            actor,
            reason,
            override=override,
            require=merge_authority(self.authority, authority_of(require)),
        )

    def _options(
        self,
        *,
        interrupt_before: Sequence[str],
        interrupt_after: Sequence[str],
        on_interrupt: InterruptHandler | None,
        durability: Durability | None,
        metadata: Mapping[str, Any] | None,
        emit: Callable[[Event], None] | None,
        control: RunControl | None,
    ) -> CallOptions:
        """Check the options `run` and `resume` share; return them with the App's defaults."""
        check_options(
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            on_interrupt=on_interrupt,
            durability=durability,
            metadata=metadata,
            emit=emit,
        )
        check_instance(control, RunControl, "control", optional=True)
        return CallOptions(
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            on_interrupt=on_interrupt,
            durability=durability or self.durability,
            metadata=metadata,
            emit=emit,
            control=control,
        )

    async def decide(
        self,
        thread: str,
        answers: Mapping[str, Any],
        *,
        actor: str | Principal | None = None,
        reason: str | None = None,
        nonce: str | None = None,
        seen: Mapping[str, str] | None = None,
        override: str | None = None,
        require: Authority | None = None,
    ) -> list[Decision]:
        """Record answers without continuing the thread; return the recorded decisions.

        Each answered interrupt leaves ``pending`` exactly once (compare-and-set); the tasks
        that wait on it run when someone continues the thread with ``app.resume(thread)``.

        Args:
            thread: The thread.
            answers: ``{interrupt_id_or_key: answer}``.
            actor: Who decides: a `Principal` (name, groups, roles), or a name (a principal
                with no groups or roles). Checked against each question's `Authority` and
                the App's (`Graph.compile(authority=...)`).
            reason: Why (kept with the decision).
            nonce: An idempotency key: sending the same decisions again with the same nonce
                returns the recorded ones instead of raising `InterruptAlreadyResolved`.
            seen: ``{interrupt_id: payload_hash}`` of the questions the person was shown (see
                `payload_hash`); a question that changed since is refused.
            override: An admin's reason for deciding outside the questions' authority: only
                a principal with role ``admin`` may; the decision and its audit entry record
                it.
            require: Rules added to every question's authority for this decision (a
                server's four eyes: ``Authority(not_starter=True)``).

        Two deciders racing on one interrupt: one decision is recorded; the other caller reads
        the thread again and gets `InterruptAlreadyResolved` carrying it (or, having sent the
        same nonce, the recorded decisions back).

        An interrupt that needs several approvals (``approve(..., approvals=N)``, a policy's
        ``require_approval(approvals=N)``) counts approvals by ``actor``: an approval that is
        not the Nth distinct one is recorded as a vote (the returned `Decision` has ``final``
        False and ``approved_by`` listing who approved so far) and the interrupt stays pending;
        the Nth resolves it, and any other answer (a rejection) resolves it at once. Votes
        racing each other are all counted: the loser of the compare-and-set reads the thread
        again and adds its vote.

        Raises:
            ValueError: ``answers`` is empty.
            UnknownInterrupt, InvalidResume, CheckpointNotFound: Nothing was recorded.
                `InvalidResume` also refuses an approval of a quorum without ``actor``, or by
                an actor who approved it already (the same vote sent again with its ``nonce``
                returns the recorded vote instead).
            InterruptAlreadyResolved: Another decision came first; it carries the recorded
                `Decision`, and nothing was recorded.
            ThreadBusy: A run holds the thread (it is being continued) and has not answered
                these interrupts; nothing was recorded, try again once it stops.
            NotAuthorized: The decider is outside a question's authority (``rule`` says
                which); nothing was recorded.
        """
        check_id(thread, "thread")
        check_ids(answers, "answers")
        who = self._decider(actor, reason, override, require)
        check_text(reason, "reason")
        check_id(nonce, "nonce", optional=True)
        check_seen(seen)
        if not answers:
            raise ValueError(
                "answers is empty: pass {interrupt_id_or_key: answer} for at least one pending "
                "interrupt (list them with app.inbox(thread=...))"
            )
        with CallScope(thread, "decide"):
            return await self._calls.decide(thread, answers, who=who, nonce=nonce, seen=seen)

    async def sweep(self, *, now: float | None = None, limit: int = 100) -> list[RunResult[StateT]]:
        """Resolve interrupts whose deadline passed by their ``on_timeout``; continue threads.

        ``"reject"`` (the default) answers False, ``timeout_default(v)`` answers ``v``,
        ``"escalate"`` asks the same question again as a new interrupt without a deadline.
        Each interrupt is marked ``expired`` by compare-and-set, so two sweepers never act on
        one twice. Returns the results of the threads it continued: all it expired, unless
        workers continue this App's threads (`continued_by`), when it only records the
        expiries, their trigger queues the continuations, and it returns none.

        Args:
            now: The time to compare deadlines with (default: the clock).
            limit: At most this many interrupts per call.
        """
        now = check_time(now, "now")
        check_limit(limit, "limit")
        drive = await self._continuation.owner() == "caller"
        return await self._calls.sweep(
            now=now, limit=limit, durability=self.durability, drive=drive
        )

    async def continued_by(self, *, refresh: bool = False) -> Continuer:
        """Who continues this App's threads after a decision that was only recorded.

        ``"workers"`` once `interlock.workers.Workers.install` put its trigger into the App's
        PostgreSQL database: the trigger queues each continuation in the decision's commit,
        and whoever recorded it (`decide`, `sweep`, the approval server) leaves the thread to
        them. Otherwise ``"caller"``: whoever recorded a decision continues the thread. The
        store is asked once; ``refresh`` asks again. (`resume` with answers always goes on
        itself: it holds the thread's lease from its decision to the run.)
        """
        check_flag(refresh, "refresh")
        return await self._continuation.owner(refresh=refresh)

    def who_decides(self, interrupt: Interrupt, *, four_eyes: bool = False) -> Authority | None:
        """The rules a decision on ``interrupt`` must meet in this App: its own `Authority`
        with the App's (`Graph.compile(authority=...)`), and with ``four_eyes`` the run's
        starter kept out. None: anyone may decide."""
        check_instance(interrupt, Interrupt, "interrupt")
        check_flag(four_eyes, "four_eyes")
        extra = Authority(not_starter=True) if four_eyes else None
        return merge_authority(interrupt.authority, self.authority, extra)

    def payload_hash(self, interrupt: Interrupt) -> str:
        """The hash of an interrupt's question, to pass back as ``decide(seen=...)``."""
        check_instance(interrupt, Interrupt, "interrupt")
        return self._reader.payload_hash(interrupt)

    async def resume(
        self,
        thread: str,
        targets: Targets | object = None,
        *,
        checkpoint_id: str | None = None,
        actor: str | Principal | None = None,
        reason: str | None = None,
        override: str | None = None,
        require: Authority | None = None,
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
            actor: Who decided (stored with the decision). An approval of an interrupt that
                needs several (see `decide`) must name one; when it is not the last approval
                needed, it is recorded as a vote and the result is ``interrupted``, still
                waiting on that interrupt.
            reason: Why (stored with the decision).
            override: As for `decide`.
            require: As for `decide`: the answers are checked against each question's
                authority first.

        Raises:
            CheckpointNotFound, UnknownInterrupt, InvalidResume, GraphChanged: Nothing was
                changed.
            NotAuthorized: The decider is outside a question's authority; nothing changed.
            InterruptAlreadyResolved: A target was answered already (also when another
                caller answered it while this one was checking); carries the recorded
                `Decision`. Nothing was changed.
            ThreadBusy: Another executor holds or changed the thread; nothing was changed.
        """
        check_id(thread, "thread")
        check_keys(targets.resume if isinstance(targets, Command) else targets, "targets")
        check_id(checkpoint_id, "checkpoint_id", optional=True)
        who = self._decider(actor, reason, override, require)
        options = self._options(
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            on_interrupt=on_interrupt,
            durability=durability,
            metadata=metadata,
            emit=emit,
            control=control,
        )
        # The decision commit comes before any task runs; it verifies a cached view of the
        # thread by compare-and-set, so the read can be skipped (see `run`).
        if emit is not None:
            emit(RunStartedEvent(thread=thread, resumed=True))
        with RunWatch(thread, self._calls.plan.name, resumed=True) as watch:
            return watch.stopped(
                await self._calls.verified(
                    thread,
                    optimistic=True,
                    new=False,
                    call=lambda opened: self._calls.resume(
                        watch.opened(opened),
                        thread,
                        targets,
                        checkpoint_id,
                        who,
                        options,
                    ),
                )
            )

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

        For example (a sketch; `RunHandle` has one that runs)::

            async with app.start({"order": 42}, thread="t") as handle:
                paused = await handle.pause(timeout=5)
        """
        # A run with input may start a new thread: its id must be a safe name.
        (check_name if resume is False else check_id)(thread, "thread")
        check_keys(resume.resume if isinstance(resume, Command) else resume, "resume")
        check_seconds(poll_interval, "poll_interval")

        async def begin(control: RunControl) -> RunResult[StateT]:
            return await self._begin(input, thread, resume, control=control, **kwargs)

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
        return await self.store.request_pause(thread, kind="forced" if forced else "planned")

    async def record_failure(self, thread: str, error: BaseException) -> str | None:
        """Leave ``thread`` visibly failed after its continuation raised ``error``.

        For whoever continues threads after decisions (workers, the approval server): when a
        continuation fails for a reason running it again will not fix (`GraphChanged`, a
        damaged checkpoint, an update the state cannot take...), the thread would otherwise
        wait on nothing. This writes a ``failed`` checkpoint with the same state and answers:
        `get_state` shows status ``failed`` and ``metadata["error"]``, with
        ``metadata["continue_with"]`` the command that continues it once the cause is fixed
        (a migration registered, say); the change feed says ``run_failed``; the
        ``interlock_threads_failed`` metric counts it. A later `resume` runs the decided
        tasks as it would have.

        Returns the id of the thread's ``failed`` checkpoint (written now, or the head already:
        a node that raised was recorded by its run), or None when there was nothing to
        record: the error is one a retry may get past (the store unreachable, the thread
        busy) or a refusal that changed nothing, or the thread moved on meanwhile.
        """
        check_id(thread, "thread")
        check_instance(error, BaseException, "error")
        return await _failures.record_failure(self._calls, thread, error)

    # -- reading ---------------------------------------------------------------------------------

    async def question(self, interrupt_id: str) -> Question | None:
        """One question with what a person deciding it needs; None when there is no such one.

        The `Question` carries the interrupt (with a pending quorum's approvals so far), the
        hash of what it asks, the decision once one is recorded, and the metadata of the
        checkpoint that asked (``started_by``). A pending question's thread is read once,
        and that read is kept: a `decide` on it that follows reads nothing more, unless
        someone wrote to the thread meanwhile (its commit then finds out, and reads again).

        Raises:
            CheckpointCorrupt: The question's record cannot be read.
        """
        check_id(interrupt_id, "interrupt_id")
        return await _threads.question(self._calls, self._reader, interrupt_id)

    async def threads(
        self,
        *,
        status: CheckpointStatus | None = None,
        limit: int = 100,
        after: str | None = None,
    ) -> list[ThreadSummary]:
        """Up to ``limit`` threads of the store, in id order, those after thread ``after``.

        With ``status``, only those whose latest checkpoint has it (``failed`` ones are read
        through an index of their own). A failed thread comes with why it failed and the
        command that continues it. Page with ``after=page[-1].thread``.
        """
        check_choice(status, "status", get_args(CheckpointStatus), optional=True)
        check_limit(limit, "limit")
        check_id(after, "after", optional=True)
        return await self._reader.threads(status=status, limit=limit, after=after)

    async def checkpoint_meta(self, thread: str, checkpoint_id: str) -> dict[str, Any]:
        """The metadata stored with one checkpoint (a run's ``metadata=``, a failure's
        ``error``); empty when the checkpoint is gone or damaged."""
        check_id(thread, "thread")
        check_id(checkpoint_id, "checkpoint_id")
        return await self._reader.checkpoint_meta(thread, checkpoint_id)

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
        where = PendingFilter(
            thread=thread,
            key=key,
            tool=tool,
            older_than=older_than,
            deadline_before=deadline_before,
        )
        return await _threads.inbox(self._calls, where, limit=limit, after=after)

    async def inbox_counts(
        self,
        *,
        thread: str | None = None,
        key: str | None = None,
        tool: str | None = None,
        older_than: float | None = None,
        deadline_before: float | None = None,
    ) -> dict[str | None, int]:
        """Return how many interrupts are pending, per tool, through the store's index.

        The filters are those of `inbox`, and the counts agree with the interrupts it lists
        for them. The keys are the tools the interrupts wait on, None for those that gate no
        tool (a node's own interrupt); a tool with nothing pending is absent. Nothing is
        decoded: the cost grows with the number counted, not with the size of the interrupts.
        """
        check_id(thread, "thread", optional=True)
        check_id(key, "key", optional=True)
        check_id(tool, "tool", optional=True)
        older_than = check_time(older_than, "older_than")
        deadline_before = check_time(deadline_before, "deadline_before")
        where = PendingFilter(
            thread=thread,
            key=key,
            tool=tool,
            older_than=older_than,
            deadline_before=deadline_before,
        )
        return await self._calls.store.pending_counts(where)

    async def get_state(
        self, thread: str, checkpoint_id: str | None = None
    ) -> StateSnapshot[StateT]:
        """Return the thread's state at its latest (or the given) checkpoint."""
        check_id(thread, "thread")
        check_id(checkpoint_id, "checkpoint_id", optional=True)
        return await _threads.get_state(self._calls, thread, checkpoint_id)

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
        return await _threads.history(self._calls, thread, limit=limit, before=before)

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
        next tasks become that node's successors. A breakpoint is not a question: at one, the
        edit keeps the thread stopped where it is when the successors include the held node,
        and ``app.resume(thread)`` runs it once with the edit. A question pending (or decided,
        not run) refuses an edit as a node with `ThreadInterrupted` unless
        ``on_pending="cancel"``. ``as_node="sub/inner"`` edits subgraph ``sub``'s own state
        while the thread is paused inside it. The edit goes to the audit log with ``actor``.
        """
        check_id(thread, "thread")
        check_id(as_node, "as_node", optional=True)
        check_choice(on_pending, "on_pending", get_args(OnPending), optional=False)
        check_name(actor, "actor", optional=True)
        return await _threads.update_state(
            self._calls, thread, values, as_node=as_node, on_pending=on_pending, actor=actor
        )

    async def fork(
        self,
        thread: str,
        checkpoint_id: str | None,
        new_thread: str,
        *,
        values: Mapping[str, Any] | None = None,
        as_node: str | None = None,
        actor: str | None = None,
        principal: Principal | None = None,
    ) -> str:
        """Copy a thread's state at a checkpoint into a new thread; return its checkpoint id.

        The source thread is not changed: its checkpoints and head stay as they are. Pending
        interrupts are copied with new ids (resume the new thread by the new ids or by key);
        tasks waiting inside subgraphs keep their progress.

        Args:
            thread: The thread to fork.
            checkpoint_id: The checkpoint to fork from (None: the thread's latest).
            new_thread: The new thread's id; it must not exist.
            values: State keys whose values the branch replaces (whole values, not through
                the reducers: an editor shows the whole value). They are checked against the
                state's schema (`state_schema`) and converted to the keys' types, a JSON
                object becoming the Struct, dataclass or TypedDict the key holds.
            as_node: Plan the branch as if this node had just run (its successors next);
                interrupts of tasks no longer planned are not copied.
            actor: Who forked, for the audit log (default: ``principal``'s name).
            principal: Who forks; when given it must have the ``admin`` role.

        The branch's first checkpoint (source ``fork``) has the metadata ``forked_from``
        (``thread``, ``checkpoint``, ``step``), ``actor``, ``as_node`` and ``edited`` (the keys
        replaced); Nones are left out. A ``fork`` audit entry goes into the branch's log with
        that checkpoint, then into the source's log (`Store.append_audit`): a crash between the
        two leaves the branch knowing where it came from.

        For example (a sketch; the tests run it), with a graph that doubles ``n``::

            start = app.history_sync("t")[-1].checkpoint_id  # the thread's first checkpoint
            app.fork_sync("t", start, "t2", values={"n": 20}, actor="ana")
            app.resume_sync("t2").values["n"]  # 40; thread "t" is as it was

        Raises:
            CheckpointNotFound: No such thread or checkpoint.
            InvalidStateEdit: ``values`` do not fit the state's schema (``problems`` lists
                each); nothing was written.
            NotAuthorized: ``principal`` is not an admin (``rule`` ``admin``); nothing was
                written.
            GraphDefinitionError: ``new_thread`` exists, or ``as_node`` is no node of the graph.
        """
        check_id(thread, "thread")
        check_id(checkpoint_id, "checkpoint_id", optional=True)
        check_name(new_thread, "new_thread")
        check_id(as_node, "as_node", optional=True)
        check_name(actor, "actor", optional=True)
        check_instance(principal, Principal, "principal", optional=True)
        if values is not None and not isinstance(values, Mapping):
            raise TypeError(f"values must be a mapping of state keys, not {type(values).__name__}")
        return await _threads.fork(
            self._calls,
            thread,
            checkpoint_id,
            new_thread,
            values=values,
            as_node=as_node,
            actor=actor,
            principal=principal,
        )

    def state_schema(self) -> dict[str, Any]:
        """The JSON Schema of the graph's state (what an edit of `fork` is checked against).

        An object with one property per state key, reducers left out; see
        `StateSchema.json_schema`.
        """
        return self.plan.schema.json_schema()

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

        The run belongs to an ``async with`` block (a sketch; the streaming how-to guide runs
        one)::

            async with app.stream({"order": 42}, thread="t") as events:
                async for event in events:
                    ...

        Events, in order: `RunStartedEvent`; per superstep `StepEvent`, `ChunkEvent`s of
        streaming nodes and `CustomEvent`s of `emit_event` (from any depth),
        `NodeOutputEvent`s, `StepFinishedEvent`, `CheckpointEvent`;
        `InterruptEvent`s (only after their checkpoint is committed); a final
        `RunFinishedEvent` when the run stops. ``modes`` picks the others: ``"run"``,
        ``"steps"``, ``"updates"``, ``"chunks"``, ``"custom"``, ``"checkpoints"``, ``"interrupts"``
        (default: all). A failed run ends the iteration with the error `run` would raise;
        leaving the block early cancels the run, which stays resumable (see `EventStream`).
        """
        # A run with input may start a new thread: its id must be a safe name.
        (check_name if resume is False else check_id)(thread, "thread")
        check_keys(resume.resume if isinstance(resume, Command) else resume, "resume")
        check_names(modes, "modes", optional=True)
        unknown = [m for m in modes or () if m not in MODES]
        if unknown:
            raise GraphDefinitionError(f"unknown stream modes {unknown}; choose from {list(MODES)}")
        kinds = {"finished"}.union(*(MODES[m] for m in modes or MODES))

        async def start(emit: Callable[[Event], None]) -> RunResult[StateT]:
            return await self._begin(input, thread, resume, emit=emit, **kwargs)

        return EventStream(start, kinds)

    async def _begin(
        self, input: Any, thread: str, resume: Targets | bool, **kwargs: Any
    ) -> RunResult[StateT]:
        """`run` (``resume=False``) or `resume` (True: no targets; else the targets)."""
        if resume is False:
            return await self.run(input, thread=thread, **kwargs)
        return await self.resume(thread, None if resume is True else resume, **kwargs)

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

    def fork_sync(
        self, thread: str, checkpoint_id: str | None, new_thread: str, **kwargs: Any
    ) -> str:
        """`fork` for scripts (starts an event loop)."""
        return _blocking("fork", lambda: self.fork(thread, checkpoint_id, new_thread, **kwargs))

    def decide_sync(self, thread: str, answers: Mapping[str, Any], **kwargs: Any) -> list[Decision]:
        """`decide` for scripts (starts an event loop)."""
        return _blocking("decide", lambda: self.decide(thread, answers, **kwargs))

    def question_sync(self, interrupt_id: str) -> Question | None:
        """`question` for scripts (starts an event loop)."""
        return _blocking("question", lambda: self.question(interrupt_id))

    def threads_sync(self, **kwargs: Any) -> list[ThreadSummary]:
        """`threads` for scripts (starts an event loop)."""
        return _blocking("threads", lambda: self.threads(**kwargs))

    def checkpoint_meta_sync(self, thread: str, checkpoint_id: str) -> dict[str, Any]:
        """`checkpoint_meta` for scripts (starts an event loop)."""
        return _blocking("checkpoint_meta", lambda: self.checkpoint_meta(thread, checkpoint_id))

    def continued_by_sync(self, *, refresh: bool = False) -> Continuer:
        """`continued_by` for scripts (starts an event loop)."""
        return _blocking("continued_by", lambda: self.continued_by(refresh=refresh))

    def sweep_sync(self, **kwargs: Any) -> list[RunResult[StateT]]:
        """`sweep` for scripts (starts an event loop)."""
        return _blocking("sweep", lambda: self.sweep(**kwargs))

    def inbox_sync(self, **kwargs: Any) -> list[Interrupt]:
        """`inbox` for scripts (starts an event loop)."""
        return _blocking("inbox", lambda: self.inbox(**kwargs))

    def inbox_counts_sync(self, **kwargs: Any) -> dict[str | None, int]:
        """`inbox_counts` for scripts (starts an event loop)."""
        return _blocking("inbox_counts", lambda: self.inbox_counts(**kwargs))

    def request_pause_sync(self, thread: str, *, forced: bool = False) -> bool:
        """`request_pause` for scripts (starts an event loop)."""
        return _blocking("request_pause", lambda: self.request_pause(thread, forced=forced))

    def record_failure_sync(self, thread: str, error: BaseException) -> str | None:
        """`record_failure` for scripts (starts an event loop)."""
        return _blocking("record_failure", lambda: self.record_failure(thread, error))


_T = TypeVar("_T")


def _blocking(method: str, call: Callable[[], Awaitable[_T]]) -> _T:
    """Run ``call`` in an event loop of its own, or say why it cannot and what to do instead."""
    if _in_event_loop():
        raise GraphDefinitionError(
            f"App.{method}_sync() cannot run inside a running event loop (a notebook cell, an "
            f"async function): use `await app.{method}(...)` there instead"
        )
    return anyio.run(call)


def _in_event_loop() -> bool:
    """True inside a running asyncio or trio event loop (anyio runs on either)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass  # none running: the usual case, and not the context of what `call` raises
    else:
        return True
    trio = sys.modules.get("trio")  # only a program that imported trio can be running it
    if trio is None:
        return False
    try:
        trio.lowlevel.current_trio_token()
    except RuntimeError:
        return False
    return True
