"""One call's view of a thread while it runs: what it found, what it commits, what it emits."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import msgspec

from .._errors import FencedOut, NodeError, ResumeError, ThreadBusy
from .._lazy import lazy_asyncio, lazy_module
from ..graph._builder import Durability
from ..stores import AuditEntry, CheckpointSource, Fence, Resolution
from ._control import RunControl
from ._engine import Engine, StepHook
from ._events import CheckpointEvent, Event, InterruptEvent, RunFinishedEvent
from ._keeper import KEEPER, Watch
from ._level import Level
from ._observe import TRACEPARENT, RunWatch, deciding, lease_lost, stored_traceparent
from ._persist import Head, ThreadIO
from ._recorder import EffectIO
from ._records import Decision, RunResult, RunStatus
from ._usage import Price, UsageMeter

if TYPE_CHECKING:
    import asyncio

    import anyio
else:  # imported by the first call that needs it, not by `import interlock`
    asyncio = lazy_asyncio(globals())
    anyio = lazy_module("anyio", globals())

__all__ = ["LeasePolicy", "Opened", "RunCtx", "Stale"]


class Stale(Exception):
    """A cached view of a thread was out of date; the call starts over from the store."""


class Opened(msgspec.Struct):
    """A thread as a call found it."""

    head: Head | None
    level: Level | None
    known: set[str]
    verified: bool = True
    """False while the view comes from this process's cache and no commit has confirmed it."""
    watch: RunWatch | None = None
    """The `App.run`/`App.resume` call that opened it, for its spans (None: another call)."""

    def check(self, error: Exception) -> None:
        """Raise ``error`` if the view is verified; otherwise start over (it may be stale)."""
        if not self.verified:
            raise Stale from error
        raise error


_STRANDED_MAX: Final = 1024
"""Stranded leases an App remembers at most; a forgotten one merely expires on its own."""


class LeasePolicy(msgspec.Struct, frozen=True):
    """How an App's runs hold their threads' leases."""

    owner: str
    """Names this process in `ThreadBusy` messages (``host:pid``)."""
    ttl: float
    """Seconds a lease lasts without a write; a running call renews it every ``ttl / 3``."""
    stranded: OrderedDict[str, int] = msgspec.field(default_factory=OrderedDict)
    """Fencing tokens of leases a call of this App failed to let go (the store failed), by
    thread. The App's next call on the thread takes the lease back with its token instead of
    waiting ``ttl`` for it: the token, not the owner's name, proves whose it is, so two calls of
    one process still exclude each other (only one of them gets the token)."""

    def strand(self, thread: str, token: int) -> None:
        """Remember a lease that is still held although its call is over."""
        self.stranded[thread] = token
        self.stranded.move_to_end(thread)
        while len(self.stranded) > _STRANDED_MAX:
            self.stranded.popitem(last=False)

    def reclaim(self, thread: str) -> int | None:
        """Take a stranded lease's token (None when there is none); one caller gets it."""
        return self.stranded.pop(thread, None) if self.stranded else None


class RunCtx:
    """One call's view of a thread: durability, the head it builds on, what it emits.

    It also holds the thread's lease while the call runs: the call's first commit acquires it
    (refused with `ThreadBusy` while another executor holds it), later commits and effects
    carry its fencing token (refused with `FencedOut` once someone else took it over), and the
    commit that ends the call releases it.
    """

    def __init__(
        self,
        *,
        io: ThreadIO,
        thread: str,
        opened: Opened,
        lease: LeasePolicy,
        recursion_limit: int,
        durability: Durability = "sync",
        metadata: Mapping[str, Any] | None = None,
        emit: Callable[[Event], None] | None = None,
        control: RunControl | None = None,
        prices: Mapping[str, Price] | None = None,
        new_run: bool = False,
    ) -> None:
        self.io = io
        self.recursion_limit = recursion_limit
        self.thread = thread
        self.durability = durability
        self.metadata = dict(metadata or {})
        watch = opened.watch
        # What links a later resume to this call's span, or to the one the thread stored
        # (carried forward by a call with no span of its own); a caller's own value is kept.
        carried = None if watch is None else watch.traceparent
        if carried is None and opened.head is not None and opened.head.meta:
            carried = stored_traceparent(opened.head.meta)
        if carried is not None:
            self.metadata.setdefault(TRACEPARENT, carried)
        self.emit = emit
        self.head = opened.head
        self.parent: Head | None = None
        self.known = opened.known
        self.opened = opened
        self.lease = lease
        self.token: int | None = None
        """The fencing token of the lease this call holds (None: it holds none)."""
        self._fence: Fence | None = None
        head = opened.head
        self.usage = UsageMeter(
            None if head is None else head.carried(),
            new_run=new_run,
            prices=prices or {},
            known=None if head is None or head.usage is not None else head.totals,
        )
        """The thread's usage totals, carried from the checkpoint this call started from."""
        self.engine = Engine(
            effects=EffectIO(io.store, io.codec, holder=self),
            control=control,
            emit=emit,
            custom=emit,
            steps=None if watch is None else watch.steps,
            usage=self.usage,
        )
        """Runs the call's levels; its effect records carry this call's lease."""

    def fence(self, *, release: bool = False) -> Fence:
        """The `Fence` of this call's next write."""
        last = self._fence
        if last is not None and last.token == self.token and last.release == release:
            return last  # a run's steps all write under one fence: build it once
        self._fence = Fence(
            owner=self.lease.owner, token=self.token, ttl=self.lease.ttl, release=release
        )
        return self._fence

    def held(self) -> Fence | None:
        """The fence of a held lease, for writes that must not acquire one (effects)."""
        return None if self.token is None else self.fence()

    async def commit(
        self,
        level: Level,
        source: CheckpointSource,
        resolutions: Sequence[Resolution],
        *,
        actor: str | None = None,
        final: bool = False,
        metadata: Mapping[str, Any] | None = None,
        decisions: Sequence[Decision] = (),
        audit: Sequence[AuditEntry] = (),
    ) -> str:
        """Commit the level; ``final`` releases the lease (the call stops after it).

        Only the final commit of a call waits for the disk: the ones before it are progress a
        crash of the process cannot lose, and a power failure could only make the call repeat
        work it never reported (the final commit's flush makes them durable too).
        """
        status = level.status()
        parent = self.parent or self.head
        meta = self.metadata
        traced = (
            deciding(self.thread, self.head.meta if self.head else None, decisions, actor)
            if decisions
            else None
        )
        if actor or metadata:
            meta = {**meta, **({"actor": actor} if actor else {}), **(metadata or {})}
        ran = level.ran_metadata()
        if ran is not None:
            meta = {**meta, "ran": ran}
        stamped = None
        if self.usage.active:
            meta = self.usage.stamp(dict(meta), final=final, starts_run=source == "input")
            stamped = self.usage.stamped

        async def write() -> tuple[Head, int | None]:
            return await self.io.commit(
                level,
                thread=self.thread,
                parent=parent,
                thread_head=self.head,
                source=source,
                status=status,
                resolutions=resolutions,
                known=self.known,
                metadata=meta,
                fence=self.fence(release=final),
                actor=actor,
                durable=final,
                decisions=decisions,
                audit=audit,
            )

        acquiring = self.token is None
        reclaimed = acquiring and self._reclaim()
        try:
            try:
                if acquiring:
                    # Shielded: once the store has written, this call must learn the token it
                    # got, or a cancellation right after the write would strand the lease.
                    # (Later writes carry the token already; it does not change.)
                    with anyio.CancelScope(shield=True):
                        head, token = await write()
                else:
                    head, token = await write()
            except FencedOut:
                if not reclaimed:
                    raise
                # Someone took the stranded lease over since: acquire the thread afresh.
                self.token = None
                with anyio.CancelScope(shield=True):
                    head, token = await write()
        except BaseException as exc:
            if traced is not None:
                traced.end(exc)
            if reclaimed and self.token is not None:
                self.lease.strand(self.thread, self.token)  # still ours; the next call retries
                self.token = None
            if isinstance(exc, ThreadBusy | ResumeError):
                self.opened.check(exc)
            raise
        if traced is not None:
            traced.end()
        self.token = None if final else token
        head.totals = stamped  # the next call on this head reads its usage totals from here
        self.head = head
        self.opened.verified = True
        self.parent = None
        if self.emit is not None:
            self.emit(CheckpointEvent(checkpoint_id=head.record.id, step=level.step, status=status))
        return head.record.id

    async def advance(self, level: Level) -> RunResult[Any]:
        on_step = self._on_step if self.durability == "sync" else None
        try:
            try:
                await self._run_leased(level, on_step)
            except NodeError as exc:
                await self._commit_failure(level, exc)
                raise
            await self.commit(level, "loop", (), final=True)
        except BaseException:
            await self.release()
            raise
        return self.stopped(level)

    def stopped(self, level: Level) -> RunResult[Any]:
        """The result of the call, which stopped with its final commit; its events emitted."""
        result = self.result(level)
        if self.emit is not None:
            for i in result.interrupts:
                self.emit(InterruptEvent(interrupt=i))
            self.emit(RunFinishedEvent(result=result))
        return result

    async def _run_leased(self, level: Level, on_step: StepHook | None) -> None:
        """Run the level; while it runs, renew the lease every ttl / 3.

        The renewals come from this call's event loop; the process's `LeaseKeeper` watches
        too, and renews from its own thread when a node blocks the loop (see `_keeper`).
        """
        if self.token is None:
            await self.engine.run(level, on_step=on_step, limit=self.recursion_limit)
            return
        watch = KEEPER.watch(self.io.store, self.thread, self.fence())
        try:
            loop = _asyncio_loop()
            if loop is None:
                await self._run_renewing_in_task_group(level, on_step, watch)
                return
            renewer = _Renewer(self, loop, watch)
            try:
                await self.engine.run(level, on_step=on_step, limit=self.recursion_limit)
            finally:
                await renewer.aclose()
        finally:
            await KEEPER.unwatch(watch)

    async def _run_renewing_in_task_group(
        self, level: Level, on_step: StepHook | None, watch: Watch
    ) -> None:
        """`_run_leased` under an event loop other than asyncio: a renewer task beside it."""
        done = anyio.Event()
        failure: list[BaseException] = []

        async def renew() -> None:
            while True:
                with anyio.move_on_after(self.lease.ttl / 3):
                    await done.wait()
                if done.is_set():
                    return
                error = await _renew_once(self, watch)
                if error is not None:
                    failure.append(error)
                    scope.cancel()
                    return

        error: Exception | None = None
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(renew)
                try:
                    await self.engine.run(level, on_step=on_step, limit=self.recursion_limit)
                except Exception as exc:  # re-raised below, not wrapped in an exception group
                    error = exc
                finally:
                    done.set()
        if failure:
            self.token = None
            raise failure[0]
        if error is not None:
            raise error

    def _reclaim(self) -> bool:
        """Hold the lease an earlier call of this App stranded on the thread, if any."""
        self.token = self.lease.reclaim(self.thread)
        return self.token is not None

    async def release(self) -> None:
        """Let the lease go early (the call failed); best effort, it also expires by itself.

        When the store fails to let it go, the App keeps the token (`LeasePolicy.strand`): its
        next call on the thread takes the lease back instead of waiting for it to expire.
        """
        if self.token is None:
            return
        token, fence = self.token, self.fence(release=True)
        self.token = None
        with anyio.CancelScope(shield=True):
            try:
                await self.io.store.renew_lease(self.thread, fence)
            except FencedOut:
                pass  # someone else holds it now: nothing of ours to let go
            except Exception:  # the store failed; the lease is still ours
                self.lease.strand(self.thread, token)

    async def _commit_failure(self, level: Level, exc: NodeError) -> None:
        # The finished tasks of the failed step are kept, so a later resume re-runs only the
        # failed ones. Other errors (bad updates, serialization) leave the last checkpoint.
        if self.token is None:
            self._reclaim()
        token, fence = self.token, self.fence(release=True)
        self.token = None
        with anyio.CancelScope(shield=True):
            try:
                await self.io.commit(
                    level,
                    thread=self.thread,
                    parent=self.head,
                    thread_head=self.head,
                    source="loop",
                    status="failed",
                    resolutions=(),
                    known=self.known,
                    metadata=self.usage.stamp(
                        {
                            **self.metadata,
                            **({"ran": ran} if (ran := level.ran_metadata()) else {}),
                            "error": f"{type(exc).__name__}: {exc}",
                        }
                    ),
                    fence=fence,
                )
            except FencedOut:
                raise
            except Exception:
                if token is not None:  # the release did not happen: the lease is still ours
                    self.lease.strand(self.thread, token)
                raise

    async def _on_step(self, level: Level) -> None:
        await self.commit(level, "loop", ())

    def result(self, level: Level) -> RunResult[Any]:
        """The call's result: the level's state as this call leaves it."""
        status = level.status()
        run_status: RunStatus = "done" if status == "ready" else status
        return RunResult(
            thread=self.thread,
            status=run_status,
            state=level.detached_view(),
            values=level.values(),
            interrupts=[r.interrupt for r in level.pending],
            checkpoint_id=self.head.record.id if self.head else None,
        )


def _asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio loop, or None under another event loop (trio)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def _renew_once(ctx: RunCtx, watch: Watch) -> FencedOut | None:
    """Extend the call's lease; return the `FencedOut` if someone else owns the thread now."""
    if ctx.token is None:
        return None
    started = time.monotonic()
    try:
        await ctx.io.store.renew_lease(ctx.thread, ctx.fence())
    except FencedOut as exc:
        lease_lost(ctx.thread, exc)
        return exc
    except Exception:  # the store hiccuped: the next period tries again
        return None
    watch.renewed(started)
    return None


class _Renewer:
    """Renews a running call's lease every ttl / 3, from a timer.

    No task exists until a step actually runs that long, so a short run keeps the event loop
    free of other tasks (which lets the stores take their fast path; see `ThreadWorker`). When
    the thread turns out to be owned by someone else, renewing stops: the run's next write (a
    step's commit, a dangerous call) is refused with `FencedOut`.
    """

    def __init__(self, ctx: RunCtx, loop: asyncio.AbstractEventLoop, watch: Watch):
        self.ctx = ctx
        self.watch = watch
        self.loop = loop
        self.task: asyncio.Task[None] | None = None
        self.stopped = False
        self.timer = loop.call_later(ctx.lease.ttl / 3, self._due)

    def _due(self) -> None:
        if not self.stopped:
            self.task = self.loop.create_task(self._renew())

    async def _renew(self) -> None:
        failure = await _renew_once(self.ctx, self.watch)
        if failure is None and not self.stopped:
            self.timer = self.loop.call_later(self.ctx.lease.ttl / 3, self._due)

    async def aclose(self) -> None:
        self.stopped = True
        self.timer.cancel()
        if self.task is not None and not self.task.done():
            with anyio.CancelScope(shield=True):  # a renewal in flight finishes first
                await self.task
