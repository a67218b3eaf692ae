"""The machinery behind `App`'s calls: open a thread, prepare a call, commit, drive a run.

`App` is the facade: it checks a caller's arguments and hands the call to `Calls`, which holds
what every call of one App shares — the plan, the store, the checkpoint I/O, the lease policy
and the cache of levels this process committed last. A call opens the thread (from the cache
when the store's head is still the checkpoint it wrote, optimistically when its first commit
will verify the view by compare-and-set), applies its options, commits its first record, and
drives the engine until the run stops.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, Generic, Literal, TypeVar

import msgspec

from .._errors import (
    CheckpointNotFound,
    FencedOut,
    InterruptAlreadyResolved,
    InvalidResume,
    NotAuthorized,
    ResumeError,
    ThreadBusy,
    ThreadInterrupted,
)
from ..graph._builder import CompiledGraph, Durability
from ..observability import _hooks
from ..stores import AuditEntry, PendingFilter, Resolution, Store
from ._authority import (
    Decider,
    check_authority,
    check_override,
    merge_authority,
)
from ._control import RunControl
from ._events import Event, RunFinishedEvent
from ._level import ESCALATE, Level, new_id
from ._observe import tool_of
from ._persist import Head, ThreadIO, cancellations, dropped_entry, ran_its_decisions
from ._records import Address, Command, Decision, Interrupt, RunResult, TimeoutDefault
from ._resume import (
    Targets,
    check_targets,
    check_votes,
    decide,
    decided_unrun,
    payload_hash,
    recorded_decision,
    recorded_vote,
    replayed_votes,
)
from ._runctx import LeasePolicy, Opened, RunCtx, Stale
from ._usage import Price

__all__ = ["CallOptions", "Calls", "InterruptHandler", "OnPending"]

StateT = TypeVar("StateT")

InterruptHandler = Callable[[Interrupt], Awaitable[Any]]
"""An ``on_interrupt`` handler: receives a pending interrupt, returns its answer."""
OnPending = Literal["raise", "cancel"]
"""What `App.run` does on a thread that still waits on interrupts."""
WARM_THREADS: Final = 256
"""Threads whose last committed level this process keeps (least recently used goes first)."""


class CallOptions(msgspec.Struct, frozen=True, kw_only=True):
    """The options of one `App.run` or `App.resume` call (the defaults: a plain commit)."""

    interrupt_before: Sequence[str] = ()
    """Extra breakpoints for this call (``"sub/inner"`` reaches into a subgraph)."""
    interrupt_after: Sequence[str] = ()
    """Same, after the node."""
    on_interrupt: InterruptHandler | None = None
    """Answers interrupts in-process."""
    durability: Durability = "sync"
    """When the call commits: every superstep, or only when it stops."""
    metadata: Mapping[str, Any] | None = None
    """Stored with the call's checkpoints."""
    emit: Callable[[Event], None] | None = None
    """Receives the call's events."""
    control: RunControl | None = None
    """Lets a run handle pause the call."""


PLAIN_CALL: Final = CallOptions()
"""The options of a call given none."""


class _Lost(Exception):
    """A decision's commit lost its compare-and-set; `Calls.decide` reads the thread again."""

    def __init__(self, error: ThreadBusy | InterruptAlreadyResolved) -> None:
        super().__init__(str(error))
        self.error = error


class Calls(Generic[StateT]):
    """What the calls of one App share, and the steps they are made of."""

    def __init__(
        self,
        plan: CompiledGraph,
        *,
        store: Store,
        io: ThreadIO,
        lease: LeasePolicy,
        recursion_limit: int,
        prices: Mapping[str, Price] | None = None,
    ) -> None:
        self.plan = plan
        self.prices: Mapping[str, Price] = prices or {}
        """What each model costs (`Graph.compile`'s ``prices``), for the usage totals."""
        self.store = store
        self.io = io
        self.lease = lease
        self.recursion_limit = recursion_limit
        # Levels this process committed last, by thread: the next call on the thread reuses
        # one when the store's head is still the checkpoint it wrote.
        self._warm: OrderedDict[str, tuple[Head, Level, set[str]]] = OrderedDict()

    # -- opening and preparing -----------------------------------------------------------

    async def open(self, thread: str, *, optimistic: bool, new: bool = False) -> Opened:
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
        head = await self.io.head(thread)
        if head is None:
            return Opened(None, None, set(), verified=True)
        if warm is not None and warm[0].record.id == head.record.id:
            # Nobody wrote since this process committed it: skip decoding the delta chain.
            warm[1].steps_taken = 0
            return Opened(*warm, verified=True)
        level, known = await self.io.load(thread, head)
        return Opened(head, level, known, verified=True)

    async def verified(
        self,
        thread: str,
        *,
        optimistic: bool,
        new: bool,
        call: Callable[[Opened], Awaitable[RunResult[StateT]]],
    ) -> RunResult[StateT]:
        """Run ``call`` on the thread as `open` finds it; once more from the store if stale."""
        try:
            return await call(await self.open(thread, optimistic=optimistic, new=new))
        except Stale:
            return await call(await self.open(thread, optimistic=False))

    def prepare(
        self,
        level: Level,
        thread: str,
        opened: Opened,
        options: CallOptions = PLAIN_CALL,
        *,
        new_run: bool = False,
    ) -> RunCtx:
        """Apply a call's options to the level; return the context that commits for it.

        ``new_run``: the call starts a run (`App.run` with input), whose usage counts anew.
        """
        level.set_run_breakpoints(options.interrupt_before, options.interrupt_after)
        metadata = options.metadata
        starter = opened.head.meta.get("started_by") if opened.head is not None else None
        if type(starter) is str and (metadata is None or "started_by" not in metadata):
            # Who started the run goes on with it, whoever continues it (separation of duties
            # is checked against it): a call that names another starts a new run.
            metadata = {**(metadata or {}), "started_by": starter}
        return RunCtx(
            io=self.io,
            thread=thread,
            opened=opened,
            lease=self.lease,
            recursion_limit=self.recursion_limit,
            durability=options.durability,
            metadata=metadata,
            emit=options.emit,
            control=options.control,
            prices=self.prices,
            new_run=new_run,
        )

    async def authorize(
        self, level: Level, opened: Opened, answers: Mapping[str, Any], who: Decider
    ) -> None:
        """Refuse the decision if any answered question's authority refuses its decider.

        Checked in the process that records the decision, whatever surface it came from;
        nothing is written on a refusal, which is counted (`decision_refused`).

        Raises:
            NotAuthorized: Which rule refused, for which question.
        """
        by_id = {r.id: r for r in level.pending}
        approvers: set[str] | None = None
        for iid in answers:
            r = by_id.get(iid)
            if r is None:
                continue
            i = r.interrupt
            authority = merge_authority(i.authority, who.require)
            try:
                if who.override is not None:
                    check_override(who, iid)
                    continue
                if authority is None:
                    continue
                starter = i.started_by
                if starter is None and opened.head is not None:
                    # Asked before questions recorded their run's starter: the run's own.
                    found = opened.head.meta.get("started_by")
                    starter = found if isinstance(found, str) else None
                if authority.not_approvers and approvers is None:
                    approvers = await self._approvers(level.thread, exclude=iid)
                check_authority(
                    authority,
                    interrupt_id=iid,
                    principal=who.principal,
                    starter=starter,
                    approvers=approvers or (),
                )
            except NotAuthorized as exc:
                if opened.verified:  # a held view is read again before the refusal stands
                    _hooks.decision_refused(tool_of(i.address), exc.rule)
                raise

    async def _approvers(self, thread: str, *, exclude: str) -> set[str]:
        """Who approved a question of ``thread`` other than ``exclude`` (its audit log)."""
        found: set[str] = set()
        after: tuple[str, int] | None = None
        while True:
            page = await self.store.audit_log(thread=thread, after=after, limit=1000)
            for entry in page:
                if entry.actor and entry.kind in ("approval", "decision"):
                    data = msgspec.json.decode(entry.data)
                    if data.get("interrupt") != exclude and _approves(data.get("answer")):
                        found.add(entry.actor)
            if len(page) < 1000:
                return found
            after = (page[-1].thread, page[-1].seq)

    def hold(self, thread: str, opened: Opened) -> None:
        """Keep a level just read from the store for the thread's next call (which takes it
        unverified: its commit checks that nobody wrote since)."""
        if opened.head is None or opened.level is None:
            return
        self._warm[thread] = (opened.head, opened.level, opened.known)
        while len(self._warm) > WARM_THREADS:
            self._warm.popitem(last=False)

    def warm_at(self, head: Head) -> tuple[Head, Level] | None:
        """The level this process committed (or held) last for ``head``'s thread, if ``head``,
        just read from the store, is still that very checkpoint; None otherwise.

        The level is the next call's to change: a reader hands out copies of it only.
        """
        warm = self._warm.get(head.record.thread)
        if warm is None:
            return None
        kept, level, _ = warm
        if kept.record.id != head.record.id or kept.record.seq != head.record.seq:
            return None  # another process (or an edit) wrote since: the store's is newer
        return kept, level

    def keep_warm(self, ctx: RunCtx, level: Level) -> None:
        """Remember the level the call committed last, for the thread's next call."""
        if ctx.head is None:
            return
        self._warm[ctx.thread] = (ctx.head, level, ctx.known)
        while len(self._warm) > WARM_THREADS:
            self._warm.popitem(last=False)

    async def drive(
        self, level: Level, ctx: RunCtx, on_interrupt: InterruptHandler | None
    ) -> RunResult[StateT]:
        """Run the level until it stops; answer its interrupts with ``on_interrupt`` if given."""
        while True:
            result: RunResult[StateT] = await ctx.advance(level)
            if on_interrupt is None or result.status != "interrupted":
                self.keep_warm(ctx, level)
                return result
            answers: dict[str, Any] = {}
            for i in result.interrupts:
                if i.needs_answer:
                    answers[i.id] = await on_interrupt(i)
            # Same checks and commit as App.resume, on the live level.
            checked = await check_targets(
                self.store, self.plan.codec, level, ctx.thread, answers, {}
            )
            # A handler names no decider: its approval of a quorum is refused (InvalidResume),
            # and so is its answer to a question that says who may decide (NotAuthorized).
            await self.authorize(level, ctx.opened, checked, Decider())
            votes = check_votes(level, checked, None)
            resolutions, decisions = decide(self.plan.codec, level, checked, votes=votes)
            await ctx.commit(level, "resume", resolutions, decisions=decisions)

    # -- run -------------------------------------------------------------------------------

    async def run(
        self, opened: Opened, input: Any, thread: str, on_pending: OnPending, options: CallOptions
    ) -> RunResult[StateT]:
        """`App.run` on the thread as opened: apply the input, commit it, drive the run."""
        level = opened.level
        resolutions: list[Resolution] = []
        audit: list[AuditEntry] = []
        if level is None:
            level = Level(self.plan, thread=thread, lineage=new_id(), base=Address())
        else:
            decided = {} if ran_its_decisions(opened.head) else decided_unrun(level)
            if level.pending or decided:
                if on_pending != "cancel":
                    ids = [*(r.id for r in level.pending), *decided]
                    opened.check(ThreadInterrupted(thread, ids, decided=list(decided)))
                resolutions = cancellations(r.id for r in level.pending)
                if decided and opened.head is not None:
                    audit.append(dropped_entry(decided, opened.head.record.id))
        level.start(self.plan.schema.values_of(input))
        ctx = self.prepare(level, thread, opened, options, new_run=True)
        if ctx.durability == "sync" or resolutions or audit:
            await ctx.commit(level, "input", resolutions, audit=audit)
        return await self.drive(level, ctx, options.on_interrupt)

    # -- resume ----------------------------------------------------------------------------

    async def resume(
        self,
        opened: Opened,
        thread: str,
        targets: Targets | object,
        checkpoint_id: str | None,
        who: Decider,
        options: CallOptions,
    ) -> RunResult[StateT]:
        """`App.resume` on the thread as opened: check, commit the answers, drive the run."""
        actor, reason = who.actor, who.reason
        head, level = opened.head, opened.level
        if head is None or level is None:
            raise CheckpointNotFound(thread)
        renamed: dict[str, str] = {}
        branch_from: Head | None = None
        if checkpoint_id is not None and checkpoint_id != head.record.id:
            branch_from = await self.io.get(thread, checkpoint_id)
            level, opened.known = await self.io.load(thread, branch_from)
            renamed = self.io.relineage(level, new_id())
        cmd = targets if isinstance(targets, Command) else None
        try:
            answers = await check_targets(
                self.store, self.plan.codec, level, thread, targets, renamed
            )
            await self.authorize(level, opened, answers, who)
            votes = check_votes(level, answers, actor)
        except ResumeError as exc:
            opened.check(exc)
            raise
        runnable = {t.id for t in level.tasks} - level.blocked() - set(level.results)
        if not answers and not runnable and cmd is None and level.pending:
            waiting = level.dynamic_pending()
            opened.check(
                InvalidResume(
                    f"thread {thread!r} waits on {len(waiting)} interrupt(s) that need an "
                    f"answer ({', '.join(r.id for r in waiting)}); "
                    "pass {id_or_key: answer} or Command(resume=...)"
                )
            )
        edits = cmd is not None and bool(cmd.update or cmd.goto)
        if not (answers or runnable or edits or level.pending or branch_from):
            # Finished: nothing to answer, nothing to run. Report the end as it is and write
            # nothing, so that repeating a resume is harmless (see decisions).
            if not opened.verified:
                raise Stale
            return self.finished(level, thread, opened, options)
        update = level.updates_of("resume", cmd.update) if cmd is not None and cmd.update else []
        ctx = self.prepare(level, thread, opened, options)
        try:
            if branch_from is not None:
                # The branch starts at the chosen checkpoint, whatever it waits on: the new
                # lineage's first checkpoint has it as parent, not the old head.
                ctx.parent = branch_from
                await ctx.commit(level, "fork", ())
            resolutions, decisions = decide(
                self.plan.codec,
                level,
                answers,
                actor=actor,
                reason=reason,
                votes=votes,
                override=who.override,
            )
            if update:
                level.apply_writes(("resume", k, v) for k, v in update)
            if cmd is not None and cmd.goto:
                goto = cmd.goto
                # Anything but a list is one target; one that is not a node is InvalidUpdate.
                extra: list[Any] = list(goto) if isinstance(goto, list | tuple) else [goto]
                level.add_goto(extra)
            if decisions and not (runnable or edits or branch_from or resolutions):
                # Only votes toward a quorum: recorded, and the thread still waits on them.
                await ctx.commit(level, "resume", (), actor=actor, final=True, decisions=decisions)
                self.keep_warm(ctx, level)
                return ctx.stopped(level)
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
        return await self.drive(level, ctx, options.on_interrupt)

    async def _told(self, thread: str, targets: Targets | object) -> None:
        """Raise `InterruptAlreadyResolved` if a target was answered since this call read."""
        level = (await self.open(thread, optimistic=False)).level
        if level is not None:
            try:
                await check_targets(self.store, self.plan.codec, level, thread, targets, {})
            except InterruptAlreadyResolved:
                raise
            except ResumeError:
                return  # anything else: the thread moved, which the caller reports

    def finished(
        self, level: Level, thread: str, opened: Opened, options: CallOptions
    ) -> RunResult[StateT]:
        """The result of a finished thread, as stored; nothing is written."""
        ctx = self.prepare(level, thread, opened, options)
        result: RunResult[StateT] = ctx.result(level)
        if options.emit is not None:
            options.emit(RunFinishedEvent(result=result))
        self.keep_warm(ctx, level)
        return result

    # -- decide ----------------------------------------------------------------------------

    async def decide(
        self,
        thread: str,
        answers: Mapping[str, Any],
        *,
        who: Decider,
        nonce: str | None,
        seen: Mapping[str, str] | None,
    ) -> list[Decision]:
        """`App.decide` with its arguments checked: record answers by compare-and-set."""
        busy: ThreadBusy | None = None
        # The first attempt may take the level this process holds of the thread (written or
        # read by it last: `App.question` keeps what it read); its commit verifies it.
        optimistic = True
        while True:
            opened = await self.open(thread, optimistic=optimistic)
            optimistic = False
            if opened.level is None:
                if not opened.verified:
                    continue
                raise CheckpointNotFound(thread)
            try:
                return await self._decide_once(opened, thread, answers, who, nonce, seen, busy)
            except Stale:
                continue  # the held level was not the thread's latest: read it
            except _Lost as lost:
                # Someone wrote since the read: read again, and what they recorded decides
                # (the same decision again, or a refusal carrying theirs). A run holding the
                # lease only makes this wait when it left the targets pending.
                error = lost.error
                busy = error if isinstance(error, ThreadBusy) and error.holder else None

    async def _decide_once(
        self,
        opened: Opened,
        thread: str,
        answers: Mapping[str, Any],
        who: Decider,
        nonce: str | None,
        seen: Mapping[str, str] | None,
        busy: ThreadBusy | None,
    ) -> list[Decision]:
        """One attempt of `decide` on the thread as read; `_Lost` when its commit was refused.

        ``busy``: a run held the lease at the last attempt; raised once the targets are checked.
        """
        level = opened.level
        assert level is not None
        actor = who.actor
        try:
            checked = await check_targets(self.store, self.plan.codec, level, thread, answers, {})
        except InterruptAlreadyResolved as exc:
            if not opened.verified:
                raise Stale from exc
            replayed = await self._replayed(level, thread, answers, actor, nonce)
            if replayed is None:
                raise
            return replayed
        except ResumeError as exc:
            opened.check(exc)
            raise
        by_id = {r.id: r for r in level.pending}
        for iid, shown in (seen or {}).items():
            r = by_id.get(iid)
            if r is not None and shown != payload_hash(self.plan.codec, r.interrupt):
                opened.check(
                    InvalidResume(
                        f"interrupt {iid} changed since it was shown; show it again and decide",
                        interrupt_id=iid,
                    )
                )
        replayed = replayed_votes(level, checked, actor, nonce)
        if replayed is not None:
            if not opened.verified:
                raise Stale
            return replayed
        try:
            await self.authorize(level, opened, checked, who)
            votes = check_votes(level, checked, actor)
        except ResumeError as exc:
            opened.check(exc)
            raise
        if busy is not None:
            raise busy
        ctx = self.prepare(level, thread, opened)
        resolutions, decisions = decide(
            self.plan.codec,
            level,
            checked,
            actor=actor,
            reason=who.reason,
            nonce=nonce,
            votes=votes,
            override=who.override,
        )
        try:
            await ctx.commit(
                level, "resume", resolutions, actor=actor, final=True, decisions=decisions
            )
        except (ThreadBusy, InterruptAlreadyResolved) as exc:
            raise _Lost(exc) from exc
        self.keep_warm(ctx, level)
        return decisions

    async def _replayed(
        self,
        level: Level,
        thread: str,
        answers: Mapping[str, Any],
        actor: str | None,
        nonce: str | None,
    ) -> list[Decision] | None:
        """The recorded decisions, when every target was already decided with ``nonce``.

        A target may also be a quorum interrupt this actor voted on with ``nonce``: still
        pending, or resolved since by others' approvals; the vote is what was recorded.
        """
        if nonce is None:
            return None
        pending = {r.id: r for r in level.pending}
        found: list[Decision] = []
        for target in answers:
            r = pending.get(target)
            if r is not None:
                vote = next((v for v in r.votes if (v.actor, v.nonce) == (actor, nonce)), None)
                if vote is None:
                    return None
                found.append(vote)
                continue
            stored = await self.store.get_interrupt(target)
            decision = None if stored is None else recorded_decision(self.plan.codec, stored)
            if stored is None or stored.thread != thread or decision is None:
                return None
            if decision.nonce != nonce:
                vote = recorded_vote(self.plan.codec, stored, actor, nonce)
                if vote is None:
                    return None
                decision = vote
            found.append(decision)
        return found

    # -- sweep -----------------------------------------------------------------------------

    async def sweep(
        self, *, now: float | None, limit: int, durability: Durability, drive: bool
    ) -> list[RunResult[StateT]]:
        """`App.sweep` with its arguments checked; ``drive``: continue the threads expired
        (False: only record the expiries, and let each thread go for its continuer)."""
        results: list[RunResult[StateT]] = []
        for thread, due in await self._due(now, limit):
            try:
                result = await self._expire(thread, due, durability, drive=drive)
            except (ThreadBusy, InterruptAlreadyResolved):
                continue  # another process acted on the thread; a later sweep looks again
            if result is not None:
                results.append(result)
        return results

    async def _due(self, now: float | None, limit: int) -> list[tuple[str, set[str]]]:
        """The threads with interrupts past their deadline, and those interrupts' ids."""
        now = time.time() if now is None else now
        rows = await self.store.pending(PendingFilter(deadline_before=now), limit=limit)
        return [
            (thread, {r.id for r in rows if r.thread == thread})
            for thread in dict.fromkeys(r.thread for r in rows)
        ]

    async def _expire(
        self, thread: str, due: set[str], durability: Durability, *, drive: bool
    ) -> RunResult[StateT] | None:
        # Sync when the thread is let go: the commit must be durable before its continuer
        # (a trigger at commit) may see it.
        durability = durability if drive else "sync"
        opened = await self.open(thread, optimistic=False)
        level = opened.level
        if level is None:
            raise CheckpointNotFound(thread)
        answers: dict[str, Any] = {}
        for r in level.pending:
            if r.id not in due:
                continue
            policy = r.on_timeout
            if isinstance(policy, TimeoutDefault):
                answers[r.id] = policy.value
            elif policy == "escalate":
                answers[r.id] = ESCALATE
            else:  # "reject", the default
                answers[r.id] = False
        ctx = self.prepare(level, thread, opened, CallOptions(durability=durability))
        resolutions, decisions = decide(
            self.plan.codec,
            level,
            answers,
            actor="sweeper",
            reason="deadline passed",
            status="expired",
        )
        await ctx.commit(
            level, "resume", resolutions, actor="sweeper", final=not drive, decisions=decisions
        )
        if not drive:
            return None
        return await self.drive(level, ctx, None)


_APPROVING_WORDS: Final = frozenset({"approve", "approved", "yes", "y", "true", "ok"})


def _approves(answer: Any) -> bool:
    """Whether a recorded answer approved: True, an approving word, or a tool call approved
    (as it was, or edited)."""
    if answer is True:
        return True
    if isinstance(answer, str):
        return answer.lower() in _APPROVING_WORDS
    if isinstance(answer, dict):  # a tool call's decision: {"action": "approve" | "edit", ...}
        return answer.get("action") in ("approve", "edit") or answer.get("type") == "approve"
    return False
