"""`MemoryStore`: the store protocol in a few dicts, for tests and single-process use."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import msgspec

from .._args import check_limit, check_name
from .._errors import (
    CheckpointNotFound,
    InterruptAlreadyResolved,
    StoreClosed,
    StoreError,
    UnknownInterrupt,
)
from .._lazy import lazy_module
from .._principals import principal_key
from ._audit import chain, thread_deleted
from ._base import (
    AuditEntry,
    AuditRecord,
    ChangeRecord,
    CheckpointRecord,
    CheckpointStatus,
    EffectRecord,
    Fence,
    InterruptRecord,
    PauseKind,
    PendingFilter,
    Resolution,
    ThreadRecord,
)
from ._changes import check_follow, check_prune, cursor_ahead, derive, seq_cursor
from ._channels import (
    ChannelMessage,
    check_channel_claim,
    check_channel_key,
    check_channel_update,
)
from ._checks import (
    Lease,
    check_append_args,
    check_audit_append,
    check_pause_kind,
    check_pending_args,
    check_renewal,
    check_seqs,
    check_text,
    check_threads_args,
    check_write,
    finish_refused,
    head_mismatch,
    lease_after,
)
from ._identities import (
    IdentityChange,
    PrincipalRecord,
    Role,
    TokenRecord,
    check_identity_page,
    check_new_principal,
    check_principal,
    check_principal_update,
    check_revoke_args,
    check_token_args,
    check_used,
    contact_query,
)
from ._lifecycle import StoreLifecycle
from ._memory_channels import ChannelTable
from ._memory_identities import IdentityTable

if TYPE_CHECKING:
    import bisect
    import heapq
else:  # imported by the first call that needs it, not by `import interlock`
    bisect = lazy_module("bisect", globals())
    heapq = lazy_module("heapq", globals())

__all__ = ["MemoryStore"]


class MemoryStore(StoreLifecycle):
    """A `Store` that keeps everything in process memory; nothing survives the process.

    It has exactly the semantics of the durable stores (compare-and-set on the head, atomic
    appends, interrupts leave ``pending`` once), so tests written against it hold for them.
    Safe for concurrent tasks of one event loop: every method decides and mutates without
    awaiting in between; none of them awaits at all. Bodies are kept as given, not copied.

    Args:
        clock: The store's time in Unix seconds: when leases expire, and when audit entries
            and effects are written. Tests pass a clock they move themselves
            (`interlock.testing.FakeClock`) rather than waiting for a lease to run out.
    """

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._closed = False
        self._threads: dict[str, ThreadRecord] = {}
        # Invariant: _checkpoints[t][i].seq == i + 1 (seqs are contiguous from 1).
        self._checkpoints: dict[str, list[CheckpointRecord]] = {}
        self._checkpoint_ids: dict[str, CheckpointRecord] = {}
        self._interrupts: dict[str, InterruptRecord] = {}
        self._interrupts_by_thread: dict[str, dict[str, None]] = {}
        # Invariant: exactly the interrupts whose status is pending, in insertion order, so a
        # stable sort by created_at breaks ties by insertion.
        self._pending: dict[str, InterruptRecord] = {}
        self._pauses: dict[str, PauseKind] = {}
        # Insertion order of every interrupt: breaks created_at ties, as a rowid does.
        self._order: dict[str, int] = {}
        self._leases: dict[str, Lease] = {}
        self._effects: dict[tuple[str, str], EffectRecord] = {}
        self._audit: dict[str, list[AuditRecord]] = {}
        # The change feed. Invariant: ascending by position; _change_seq is the position of the
        # last change ever written (pruning never lowers it, so no position is used twice).
        self._changes: list[tuple[int, ChangeRecord]] = []
        self._change_seq = 0
        self._identities = IdentityTable()
        self._channel_messages = ChannelTable()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return (
            f"<MemoryStore {len(self._threads)} threads, {len(self._checkpoint_ids)} checkpoints, "
            f"{len(self._pending)} pending {state}>"
        )

    async def append_checkpoint(
        self,
        record: CheckpointRecord,
        *,
        expected_head: str | None,
        new_interrupts: Sequence[InterruptRecord] = (),
        resolutions: Sequence[Resolution] = (),
        fence: Fence | None = None,
        audit: Sequence[AuditEntry] = (),
        durable: bool = True,
    ) -> int | None:
        """Commit a checkpoint, its new interrupts and resolutions at once (see `Store`)."""
        # No await: there is no I/O to wait for, and yielding to the event loop per checkpoint
        # would dominate the cost of an in-memory run. The method is atomic by construction.
        self._check_open()
        check_append_args(record, new_interrupts, resolutions, expected_head, audit, fence)
        # Invariant: everything that can fail is computed before the first mutation, so an
        # append lands whole or not at all.
        lease = self._lease(record.thread, fence)
        resolved = self._check_append(record, expected_head, new_interrupts, resolutions)
        entries = self._chained(record.thread, audit)
        self._apply_append(record, new_interrupts, resolved)
        self._leases[record.thread] = lease
        self._extend(record.thread, entries)
        self._feed(record, new_interrupts, resolutions)
        return None if fence is None else lease[1]

    def _feed(
        self,
        record: CheckpointRecord,
        new_interrupts: Sequence[InterruptRecord],
        resolutions: Sequence[Resolution],
    ) -> None:
        for kind, interrupt_id in derive(record, new_interrupts, resolutions):
            self._change_seq += 1
            change = ChangeRecord(
                cursor=str(self._change_seq),
                at=record.created_at,
                kind=kind,
                thread=record.thread,
                checkpoint_id=record.id,
                interrupt_id=interrupt_id,
            )
            self._changes.append((self._change_seq, change))

    def _lease(self, thread: str, fence: Fence | None) -> Lease:
        current = self._leases.get(thread)
        if fence is not None and current is not None and fence.token == current[1]:
            # The holder writes again (every step of a run): no one else to check for.
            return (
                (None, current[1], 0.0)
                if fence.release
                else (
                    fence.owner,
                    current[1],
                    self._clock() + fence.ttl,
                )
            )
        return lease_after(thread, current, fence, self._clock())

    def _chained(self, thread: str, entries: Sequence[AuditEntry]) -> list[AuditRecord]:
        """The audit records ``entries`` become (may fail: nothing is changed yet)."""
        if not entries:
            return []
        log = self._audit.get(thread)
        tail = (log[-1].seq, log[-1].hash) if log else None
        return chain(thread, tail, entries, self._clock())

    def _extend(self, thread: str, records: list[AuditRecord]) -> None:
        if records:
            self._audit.setdefault(thread, []).extend(records)

    async def renew_lease(self, thread: str, fence: Fence) -> None:
        """Extend or release a held lease (see `Store.renew_lease`)."""
        check_text("thread", thread)
        self._check_open()
        check_renewal(fence)
        self._leases[thread] = self._lease(thread, fence)

    async def begin_effect(
        self,
        thread: str,
        key: str,
        *,
        name: str,
        fence: Fence | None,
        retry: bool = False,
        audit: Sequence[AuditEntry] = (),
    ) -> tuple[bool, EffectRecord]:
        """Record that an effect is about to be called, unless it was (see `Store`)."""
        check_text("thread", thread)
        check_text("key", key)
        check_text("name", name)
        check_write(fence, audit)
        self._check_open()
        lease = self._lease(thread, fence)
        found = self._effects.get((thread, key))
        if found is not None and not (retry and found.status == "started"):
            return False, found
        now = self._clock()
        record = EffectRecord(
            thread=thread,
            key=key,
            name=name,
            status="started",
            attempt=1 if found is None else found.attempt + 1,
            started_at=now,
        )
        entries = self._chained(thread, audit)
        self._effects[(thread, key)] = record
        self._leases[thread] = lease
        self._extend(thread, entries)
        return True, record

    async def finish_effect(
        self,
        thread: str,
        key: str,
        *,
        result: bytes | None,
        fence: Fence | None,
        audit: Sequence[AuditEntry] = (),
        durable: bool = True,
    ) -> None:
        """Record an effect's outcome (see `Store.finish_effect`)."""
        check_text("thread", thread)
        check_text("key", key)
        check_write(fence, audit)
        self._check_open()
        lease = self._lease(thread, fence)
        found = self._effects.get((thread, key))
        if found is None or found.status != "started":
            refused = finish_refused(thread, key, found, result)
            if refused is None:
                return  # the same outcome recorded again (a retried call)
            raise refused
        done = msgspec.structs.replace(
            found, status="done", finished_at=self._clock(), result=result
        )
        entries = self._chained(thread, audit)
        self._effects[(thread, key)] = done
        self._leases[thread] = lease
        self._extend(thread, entries)

    async def get_effect(self, thread: str, key: str) -> EffectRecord | None:
        """Return one effect record, or None."""
        check_text("thread", thread)
        check_text("key", key)
        self._check_open()
        return self._effects.get((thread, key))

    async def audit_log(
        self, *, thread: str | None = None, after: tuple[str, int] | None = None, limit: int = 1000
    ) -> list[AuditRecord]:
        """Return audit records ordered by (thread, seq) after the cursor."""
        check_text("thread", thread, optional=True)
        if after is not None:
            check_text("after[0]", after[0])
        self._check_open()
        threads = [thread] if thread is not None else sorted(self._audit)
        out: list[AuditRecord] = []
        for t in threads:
            if after is not None and t < after[0]:
                continue
            for r in self._audit.get(t, []):
                if after is not None and (t, r.seq) <= after:
                    continue
                if len(out) >= max(limit, 0):
                    return out
                out.append(r)
        return out

    async def append_audit(
        self, thread: str, entries: Sequence[AuditEntry], *, durable: bool = True
    ) -> None:
        """Append entries to an existing thread's audit log (see `Store.append_audit`)."""
        check_audit_append(thread, entries)
        self._check_open()
        if thread not in self._threads:
            raise CheckpointNotFound(thread)
        self._extend(thread, self._chained(thread, entries))

    def _check_append(
        self,
        record: CheckpointRecord,
        expected_head: str | None,
        new_interrupts: Sequence[InterruptRecord],
        resolutions: Sequence[Resolution],
    ) -> list[InterruptRecord]:
        """Raise what a backend's transaction would raise; return the resolved interrupts."""
        thread = record.thread
        head = self._threads.get(thread)
        busy = head_mismatch(
            record, expected_head, None if head is None else (head.head_id, head.head_seq)
        )
        if busy is not None:
            raise busy
        resolved: dict[str, InterruptRecord] = {}
        for res in resolutions:
            current = resolved.get(res.id) or self._interrupts.get(res.id)
            if current is None or current.thread != thread:
                mine = PendingFilter(thread=thread)
                pending = [i.id for i in self._oldest_pending(mine, len(self._pending))]
                raise UnknownInterrupt(res.id, pending, thread=thread)
            if current.status != "pending":
                raise InterruptAlreadyResolved(res.id, status=current.status)
            resolved[res.id] = msgspec.structs.replace(
                current, status=res.status, resolved_at=res.resolved_at, resolution=res.resolution
            )
        if record.id in self._checkpoint_ids:
            raise StoreError(
                f"cannot append checkpoint {record.id!r} to thread {thread!r}: the id is taken; "
                "checkpoint ids must be unique across the store"
            )
        if new_interrupts:  # most appends raise none: skip building the set
            new_ids = {i.id for i in new_interrupts}
            if len(new_ids) < len(new_interrupts) or any(i in self._interrupts for i in new_ids):
                raise StoreError(
                    f"cannot append checkpoint {record.id!r} to thread {thread!r}: a new interrupt "
                    "reuses an id; interrupt ids must be unique across the store"
                )
        return list(resolved.values())

    def _apply_append(
        self,
        record: CheckpointRecord,
        new_interrupts: Sequence[InterruptRecord],
        resolved: list[InterruptRecord],
    ) -> None:
        thread = record.thread
        self._checkpoints.setdefault(thread, []).append(record)
        self._checkpoint_ids[record.id] = record
        self._threads[thread] = ThreadRecord(
            thread=thread,
            head_id=record.id,
            head_seq=record.seq,
            status=record.status,
            updated_at=record.created_at,
        )
        for interrupt in resolved:
            self._interrupts[interrupt.id] = interrupt
            del self._pending[interrupt.id]
        by_thread = self._interrupts_by_thread.setdefault(thread, {})
        for interrupt in new_interrupts:
            self._interrupts[interrupt.id] = interrupt
            by_thread[interrupt.id] = None
            self._order[interrupt.id] = len(self._order)
            if interrupt.status == "pending":
                self._pending[interrupt.id] = interrupt

    async def get_checkpoint(self, thread: str, id: str | None = None) -> CheckpointRecord | None:
        """Return one checkpoint (the head when ``id`` is None), or None if absent."""
        check_text("thread", thread)
        check_text("id", id, optional=True)
        self._check_open()
        if id is None:
            chain = self._checkpoints.get(thread)
            return chain[-1] if chain else None
        found = self._checkpoint_ids.get(id)
        return found if found is not None and found.thread == thread else None

    async def checkpoint_range(self, thread: str, *, lo: int, hi: int) -> list[CheckpointRecord]:
        """Return the thread's checkpoints with ``lo <= seq <= hi``, ascending by seq."""
        check_text("thread", thread)
        self._check_open()
        chain = self._checkpoints.get(thread, [])
        return chain[max(lo, 1) - 1 : max(hi, 0)]

    async def checkpoints_at(self, thread: str, seqs: Sequence[int]) -> list[CheckpointRecord]:
        """Return the thread's checkpoints whose seq is in ``seqs``, ascending by seq."""
        check_text("thread", thread)
        wanted = check_seqs(seqs)
        self._check_open()
        chain = self._checkpoints.get(thread, [])
        return [chain[s - 1] for s in wanted if 1 <= s <= len(chain)]

    async def list_checkpoints(
        self, thread: str, *, before_seq: int | None = None, limit: int = 50
    ) -> list[CheckpointRecord]:
        """Return up to ``limit`` checkpoints with ``seq < before_seq``, newest first."""
        check_text("thread", thread)
        self._check_open()
        chain = self._checkpoints.get(thread, [])
        end = len(chain) if before_seq is None else min(max(before_seq - 1, 0), len(chain))
        start = max(end - max(limit, 0), 0)
        return chain[start:end][::-1]

    async def get_thread(self, thread: str) -> ThreadRecord | None:
        """Return the thread's head record, or None if the thread does not exist."""
        check_text("thread", thread)
        self._check_open()
        return self._threads.get(thread)

    async def threads(
        self,
        *,
        status: CheckpointStatus | None = None,
        limit: int = 100,
        after: str | None = None,
    ) -> list[ThreadRecord]:
        """Return threads' heads in thread id order (see `Store.threads`)."""
        check_threads_args(status, after)
        self._check_open()
        found = sorted(
            (r for r in self._threads.values() if status is None or r.status == status),
            key=lambda r: r.thread,
        )
        return [r for r in found if after is None or r.thread > after][: max(limit, 0)]

    async def get_interrupt(self, id: str) -> InterruptRecord | None:
        """Return one interrupt by id, or None."""
        check_text("id", id)
        self._check_open()
        return self._interrupts.get(id)

    async def pending(
        self, where: PendingFilter | None = None, /, *, limit: int = 100, after: str | None = None
    ) -> list[InterruptRecord]:
        """Return pending interrupts, oldest first (ties in insertion order)."""
        where = check_pending_args(where, after)
        self._check_open()
        return self._oldest_pending(where, limit, after)

    async def pending_counts(self, where: PendingFilter | None = None, /) -> dict[str | None, int]:
        """Return how many pending interrupts match ``where``, per tool."""
        where = check_pending_args(where, None)
        self._check_open()
        counts: dict[str | None, int] = {}
        for i in self._pending.values():
            if where.matches(i):
                counts[i.tool] = counts.get(i.tool, 0) + 1
        return counts

    def _oldest_pending(
        self, where: PendingFilter, limit: int, after: str | None = None
    ) -> list[InterruptRecord]:
        start: tuple[float, int] | None = None
        if after is not None:
            last = self._interrupts.get(after)
            if last is None:
                return []
            start = (last.created_at, self._order[after])
        order = self._order
        matches = (
            i
            for i in self._pending.values()
            if where.matches(i) and (start is None or (i.created_at, order[i.id]) > start)
        )
        return heapq.nsmallest(max(limit, 0), matches, key=lambda i: (i.created_at, order[i.id]))

    async def request_pause(self, thread: str, *, kind: PauseKind = "planned") -> bool:
        """Ask whoever runs the thread to pause it (see `Store.request_pause`)."""
        check_text("thread", thread)
        check_pause_kind(kind)
        self._check_open()
        if thread not in self._threads:
            return False
        if kind == "forced" or self._pauses.get(thread) != "forced":
            self._pauses[thread] = kind
        return True

    async def take_pause_request(self, thread: str) -> PauseKind | None:
        """Return and remove the thread's pause request (see `Store.take_pause_request`)."""
        check_text("thread", thread)
        self._check_open()
        return self._pauses.pop(thread, None)

    async def expire(self, *, older_than: float, limit: int = 1000) -> list[str]:
        """Delete finished threads last written before ``older_than`` (see `Store.expire`)."""
        self._check_open()
        gone = [
            t.thread
            for t in self._threads.values()
            if t.status == "done" and t.updated_at < older_than
        ][: max(limit, 0)]
        for thread in gone:
            await self.delete_thread(thread)
        return gone

    async def delete_thread(self, thread: str) -> None:
        """Delete a thread, its checkpoints and its interrupts. No-op if absent."""
        check_text("thread", thread)
        self._check_open()
        if thread in self._threads:
            self._extend(thread, self._chained(thread, [thread_deleted()]))
            del self._threads[thread]
        self._pauses.pop(thread, None)
        self._leases.pop(thread, None)
        for effect in [k for k in self._effects if k[0] == thread]:
            del self._effects[effect]
        for checkpoint in self._checkpoints.pop(thread, []):
            del self._checkpoint_ids[checkpoint.id]
        for interrupt_id in self._interrupts_by_thread.pop(thread, {}):
            del self._interrupts[interrupt_id]
            self._pending.pop(interrupt_id, None)
        self._channel_messages.forget_thread(thread)

    async def changes(self, *, after: str | None = None, limit: int = 1000) -> list[ChangeRecord]:
        """Return the changes committed after cursor ``after`` (see `Store.changes`).

        A cursor is the decimal position of the last change seen; ``"0"`` is before the first.
        """
        check_follow(after, limit)
        position = seq_cursor(after)
        self._check_open()
        if position > self._change_seq:
            raise cursor_ahead(str(after), str(self._change_seq))
        start = bisect.bisect_right(self._changes, position, key=lambda c: c[0])
        return [change for _, change in self._changes[start : start + limit]]

    async def change_cursor(self) -> str:
        """Return the cursor of now (see `Store.change_cursor`)."""
        self._check_open()
        return str(self._change_seq)

    async def prune_changes(self, *, older_than: float, limit: int = 10000) -> int:
        """Delete changes committed before ``older_than`` (see `Store.prune_changes`)."""
        moment = check_prune(older_than, limit)
        self._check_open()
        gone = 0
        for _, change in itertools.islice(self._changes, limit):
            if change.at >= moment:
                break
            gone += 1
        del self._changes[:gone]
        return gone

    async def add_principal(
        self,
        name: str,
        *,
        role: Role,
        display_name: str = "",
        groups: Sequence[str] = (),
        email: str | None = None,
        slack_user: str | None = None,
    ) -> PrincipalRecord:
        """Add a principal (see `Store.add_principal`)."""
        key, named, mail, user = check_new_principal(
            name, role, display_name, groups, email, slack_user
        )
        self._check_open()
        return self._identities.add_principal(
            key,
            name,
            role=role,
            display_name=display_name,
            groups=named,
            email=mail,
            slack_user=user,
            now=self._clock(),
        )

    async def update_principal(
        self,
        name: str,
        *,
        role: Role | None = None,
        display_name: str | None = None,
        groups: Sequence[str] | None = None,
        disabled: bool | None = None,
        email: str | None = None,
        slack_user: str | None = None,
    ) -> PrincipalRecord:
        """Change a principal (see `Store.update_principal`)."""
        key, named, mail, user = check_principal_update(
            name, role, display_name, groups, disabled, email, slack_user
        )
        self._check_open()
        return self._identities.update_principal(
            key,
            name,
            role=role,
            display_name=display_name,
            groups=named,
            disabled=disabled,
            email=mail,
            slack_user=user,
        )

    async def principal_by_contact(
        self, *, email: str | None = None, slack_user: str | None = None
    ) -> PrincipalRecord | None:
        """Return the principal with this e-mail address or Slack user id, or None (see
        `Store.principal_by_contact`)."""
        field, value = contact_query(email, slack_user)
        self._check_open()
        return self._identities.principal_by_contact(field, value)

    async def get_principal(self, name: str) -> PrincipalRecord | None:
        """Return the principal named ``name`` (in normal form), or None."""
        key = check_principal(name)
        self._check_open()
        return self._identities.get_principal(key)

    async def principals(
        self, *, limit: int = 100, after: str | None = None
    ) -> list[PrincipalRecord]:
        """Return principals in the order of their keys (see `Store.principals`)."""
        check_limit(limit, "limit")
        start = None if after is None else check_principal(after)
        self._check_open()
        return self._identities.principals(limit, start)

    async def add_token(
        self,
        id: str,
        *,
        hash: str,
        principal: str,
        role: Role | None = None,
        tools: Sequence[str] = ("*",),
        threads: Sequence[str] = ("",),
        expires_at: float | None = None,
    ) -> TokenRecord:
        """Add a token of a principal (see `Store.add_token`)."""
        check_principal(principal)
        scopes = check_token_args(id, hash, role, tools, threads, expires_at)
        self._check_open()
        return self._identities.add_token(
            id,
            hash=hash,
            principal=principal,
            role=role,
            tools=scopes[0],
            threads=scopes[1],
            expires_at=expires_at,
            now=self._clock(),
        )

    async def tokens(
        self, *, principal: str | None = None, limit: int = 100, after: str | None = None
    ) -> list[TokenRecord]:
        """Return tokens in id order (see `Store.tokens`)."""
        key = None if principal is None else check_principal(principal)
        check_limit(limit, "limit")
        check_name(after, "after", optional=True)
        self._check_open()
        return self._identities.tokens(key, limit, after)

    async def revoke_tokens(
        self, *, id: str | None = None, principal: str | None = None
    ) -> list[TokenRecord]:
        """Revoke one token or all of a principal's (see `Store.revoke_tokens`)."""
        check_revoke_args(id, principal)
        self._check_open()
        owner = None if principal is None else (principal_key(principal), principal)
        return self._identities.revoke_tokens(id, owner, self._clock())

    async def touch_tokens(self, used: Mapping[str, float]) -> None:
        """Record when tokens were used (see `Store.touch_tokens`)."""
        checked = check_used(used)
        self._check_open()
        self._identities.touch_tokens(checked)

    async def identity_changes(self, *, after: int = 0, limit: int = 1000) -> list[IdentityChange]:
        """Return the principals and tokens written after revision ``after`` (see
        `Store.identity_changes`)."""
        start = check_identity_page(after, limit)
        self._check_open()
        return self._identities.changes(start, limit)

    async def claim_channel_message(self, channel: str, interrupt_id: str, *, thread: str) -> bool:
        """Take the job of posting the channel's message about an interrupt (see
        `Store.claim_channel_message`)."""
        check_channel_claim(channel, interrupt_id, thread)
        self._check_open()
        return self._channel_messages.claim(channel, interrupt_id, thread, self._clock())

    async def set_channel_message(
        self,
        channel: str,
        interrupt_id: str,
        *,
        ref: str | None = None,
        state: str | None = None,
    ) -> ChannelMessage:
        """Record the posted message's handle and/or what it shows (see
        `Store.set_channel_message`)."""
        check_channel_key(channel, interrupt_id)
        check_channel_update(ref, state)
        self._check_open()
        return self._channel_messages.set(channel, interrupt_id, ref, state, self._clock())

    async def get_channel_message(self, channel: str, interrupt_id: str) -> ChannelMessage | None:
        """Return the channel's message about an interrupt, or None (see
        `Store.get_channel_message`)."""
        check_channel_key(channel, interrupt_id)
        self._check_open()
        return self._channel_messages.get(channel, interrupt_id)

    async def close(self) -> None:
        """Mark the store closed and drop its data. Idempotent."""
        self._closed = True
        self._threads.clear()
        self._checkpoints.clear()
        self._checkpoint_ids.clear()
        self._interrupts.clear()
        self._interrupts_by_thread.clear()
        self._pending.clear()
        self._leases.clear()
        self._effects.clear()
        self._audit.clear()
        self._changes.clear()
        self._identities.clear()
        self._channel_messages.clear()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("this MemoryStore was closed; create a new one")
