"""Checkpoint bodies in and out of a store: delta chains, snapshots, interrupt index rows.

A checkpoint body stores channel *deltas* against its parent; every so often it stores full
values instead (a snapshot), so rebuilding a state reads one snapshot plus the deltas after it.

A snapshot does not copy what earlier snapshots of the thread already hold of a list that only
grows (an `append` key): it names them, ``(seq, count)`` each, and stores the items after them,
so a long chat's state is a few large rows, each message stored in one of them (decision 57).
What a snapshot still copies is the rest of the state, its *fixed* bytes. Snapshots are taken
when the bytes of deltas since the last one reach `SNAPSHOT_MIN_BYTES` and twice the fixed
bytes, or after `SNAPSHOT_MAX_CHAIN` checkpoints: a rebuild reads the snapshot, the snapshots it
names and at most that many bytes of deltas, and the store holds the deltas, each shared item
once more, and at most half the deltas' size again in fixed bytes. A small state (under
`SNAPSHOT_SMALL_BYTES` with its deltas) is always stored whole, so loading it is a single read.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import msgspec

from .._collector import collector_paused
from .._errors import (
    CheckpointCorrupt,
    CheckpointNotFound,
    GraphChanged,
    UnregisteredType,
)
from ..graph._builder import CompiledGraph, Migration
from ..graph._channels import AppendChannel
from ..serde import Codec
from ..stores import (
    AuditEntry,
    AuditKind,
    CheckpointRecord,
    Fence,
    InterruptRecord,
    Resolution,
    Store,
)
from ._authority import Authority
from ._context import interrupt_id
from ._level import Level, new_id
from ._observe import committed
from ._records import Address, Decision, Interrupt
from ._resume import payload_hash
from ._signals import Raised
from ._usage import USAGE, UsageTotals, is_running_time, usage_as_of
from ._wire import apply_channels, level_from_wire, level_to_wire, raised_from_wire, raised_to_wire

__all__ = [
    "CONTINUE_WITH",
    "FAILURE",
    "SNAPSHOT_MAX_CHAIN",
    "SNAPSHOT_MIN_BYTES",
    "SNAPSHOT_SMALL_BYTES",
    "Head",
    "ThreadIO",
    "cancellations",
    "dropped_entry",
    "fork_entry",
    "ran_its_decisions",
]

FAILURE = "error"
"""The metadata key of a failed checkpoint's reason, ``"<ErrorType>: <message>"``."""
CONTINUE_WITH = "continue_with"
"""The metadata key, on the failed checkpoint of a continuation that could not run (see
`ThreadIO.commit_failed`), of the command that continues the thread once the cause is fixed.
Its decided tasks never ran: they are still the thread's to run."""

SNAPSHOT_MIN_BYTES = 32 * 1024
"""The fewest bytes of deltas a new snapshot waits for (the most a rebuild reads, usually)."""
SNAPSHOT_MAX_CHAIN = 1000
SNAPSHOT_SMALL_BYTES = 2048
"""While snapshot + deltas stay under this, every checkpoint is a snapshot (one read to load)."""
READ_CACHE_THREADS = 32
"""How many threads' latest states `ThreadIO.read` keeps decoded."""
READ_CACHE_BYTES = 32 * 1024 * 1024
"""The most encoded bytes (snapshot plus deltas) the states `ThreadIO.read` keeps stand for."""


class _Read(msgspec.Struct):
    """What `ThreadIO.read` keeps of a thread: the state it rebuilt (private, never handed
    out; copies are), or after a first read only the rows it was rebuilt from."""

    record: CheckpointRecord
    level: Level | None
    meta: dict[str, Any]
    weight: int
    rows: dict[int, CheckpointRecord] | None = None


class _Rows:
    """Where `ThreadIO.load` reads rows from: the store, keeping every row it returns, after
    the rows ``kept`` from an earlier read (rows never change once written)."""

    def __init__(self, store: Store, kept: Mapping[int, CheckpointRecord] | None = None) -> None:
        self.store = store
        self.kept: dict[int, CheckpointRecord] = dict(kept or {})

    async def checkpoint_range(self, thread: str, *, lo: int, hi: int) -> list[CheckpointRecord]:
        kept = self.kept
        missing = [seq for seq in range(max(lo, 1), hi + 1) if seq not in kept]
        if missing:
            rows = await self.store.checkpoint_range(thread, lo=missing[0], hi=missing[-1])
            kept.update((r.seq, r) for r in rows)
        return [kept[seq] for seq in range(max(lo, 1), hi + 1) if seq in kept]

    async def checkpoints_at(self, thread: str, seqs: Sequence[int]) -> list[CheckpointRecord]:
        kept = self.kept
        missing = [seq for seq in seqs if seq not in kept]
        if missing:
            kept.update((r.seq, r) for r in await self.store.checkpoints_at(thread, missing))
        return [kept[seq] for seq in sorted(set(seqs)) if seq in kept]


class Head(msgspec.Struct):
    """A checkpoint record plus what its decoded body says about the delta chain."""

    record: CheckpointRecord
    chain_bytes: int = 0
    """Bytes of deltas since (and excluding) the base snapshot, this body included."""
    snapshot_bytes: int = 0
    """Size of the base snapshot's body, plus that of the snapshots it names (an estimate)."""
    fixed_bytes: int = 0
    """What of the base snapshot's body a later snapshot copies again (its size less the
    items of append keys, which later snapshots name instead)."""
    meta: dict[str, Any] = msgspec.field(default_factory=dict)
    """The metadata stored with the checkpoint."""
    migrated: bool = False
    """Loaded through a migration: the next checkpoint must be a full snapshot."""
    usage: dict[str, Any] | None = None
    """The usage totals as of the checkpoint, when its metadata holds only the running
    seconds (found by `ThreadIO.load` in the checkpoints before it; see `_usage`)."""
    totals: UsageTotals | None = None
    """Its metadata's usage totals as `UsageTotals.from_meta` reads them, when the call that
    wrote it holds them already (`UsageMeter.stamped`): the next call need not read them."""

    def carried(self) -> dict[str, Any]:
        """The metadata a call continuing from here carries: its usage totals whole."""
        return self.meta if self.usage is None else {**self.meta, USAGE: self.usage}


def ran_its_decisions(head: Head | None) -> bool:
    """Whether the tasks decided before ``head`` ran: only when a run failed in them.

    A run that failed did continue its decided tasks, so what is left of their answers goes
    with new input or an edit (decision 9). A continuation that could not run at all
    (`record_failure`, which leaves `CONTINUE_WITH` in the metadata) did not: its decided
    tasks wait, as on the ready thread it was.
    """
    return head is not None and head.record.status == "failed" and CONTINUE_WITH not in head.meta


class ThreadIO:
    """Reads and writes one App's checkpoints."""

    def __init__(
        self,
        store: Store,
        plan: CompiledGraph,
        migrations: Mapping[str, Migration] | None = None,
    ) -> None:
        self.store = store
        self.plan = plan
        self.codec = plan.codec
        # A store that checks each checkpoint row against a digest covering its body (see
        # `Store`) has checked its bytes: the codec need not compute their CRC-32 again.
        self._checked = getattr(store, "verifies_checkpoints", False) is True
        self.migrations = dict(migrations or {})
        self._reads: OrderedDict[str, _Read] = OrderedDict()
        self._read_bytes = 0

    async def head(self, thread: str) -> Head | None:
        """The thread's latest checkpoint, or None for a new thread."""
        record = await self.store.get_checkpoint(thread)
        return None if record is None else Head(record)

    async def get(self, thread: str, checkpoint_id: str | None) -> Head:
        """One checkpoint (the latest when ``checkpoint_id`` is None)."""
        record = await self.store.get_checkpoint(thread, checkpoint_id)
        if record is None:
            raise CheckpointNotFound(thread, checkpoint_id)
        return Head(record)

    def decode(self, record: CheckpointRecord) -> dict[str, Any]:
        """Decode a body, turning any damage into `CheckpointCorrupt`."""
        try:
            body = self.codec.decode(record.body, checked=self._checked)
        except CheckpointCorrupt as exc:
            raise CheckpointCorrupt(
                f"checkpoint {record.id} of thread {record.thread!r} is damaged: {exc}",
                thread=record.thread,
                checkpoint_id=record.id,
            ) from exc
        return _checked_body(record, body)

    def decode_chain(self, records: Sequence[CheckpointRecord]) -> list[dict[str, Any]]:
        """Decode several bodies at once (`Codec.decode_many`), each checked as `decode` does.

        A long delta chain is hundreds of small bodies: parsed one by one, but their tags and
        depth checked in one pass over the batch, with the collector paused meanwhile.
        """
        if len(records) < 2:
            return [self.decode(r) for r in records]
        with collector_paused():
            try:
                bodies = self.codec.decode_many([r.body for r in records], checked=self._checked)
            except CheckpointCorrupt:
                return [self.decode(r) for r in records]  # raises, naming the damaged one
        return [_checked_body(r, body) for r, body in zip(records, bodies, strict=True)]

    async def load(
        self, thread: str, head: Head, *, rows: _Rows | None = None
    ) -> tuple[Level, set[str]]:
        """Rebuild the level stored at ``head``; also return its pending interrupt ids.

        The rows it needs besides ``head`` come from the store, or through ``rows``.
        """
        source: Store | _Rows = self.store if rows is None else rows
        record = head.record
        body = self.decode(record)
        migrate = None
        if body.get("fp") != self.plan.fingerprint:
            migrate = self.migrations.get(str(body.get("fp")))
            if migrate is None:
                raise GraphChanged(
                    thread=thread, stored=str(body.get("fp")), current=self.plan.fingerprint
                )
        try:
            level = level_from_wire(self.plan, body, thread=thread, channels=False)
        except CheckpointCorrupt as exc:
            if migrate is None:
                raise
            raise GraphChanged(
                thread=thread,
                stored=str(body.get("fp")),
                current=self.plan.fingerprint,
                detail=f"the checkpoint's tasks do not fit the new graph: {exc}",
            ) from exc
        base, bodies = record, [body]
        if record.base_seq != record.seq:
            found = await source.checkpoint_range(thread, lo=record.base_seq, hi=record.seq - 1)
            chain = _ancestry(record, found)
            base, bodies = chain[0], [*self.decode_chain(chain), body]
        bodies[0], shared = await self._resolve(thread, base, bodies[0], source=source)
        if migrate is not None:
            self._migrate(level, bodies, record, migrate)
            head.migrated = True
        else:
            _apply_deltas(level, bodies[:1], record)
            _share(level, shared)
            _apply_deltas(level, bodies[1:], record)
        for ch in level.channels.values():
            ch.mark()
        if record.base_seq == record.seq:
            head.chain_bytes = 0
            head.snapshot_bytes = len(record.body) + _size(body, "shb", 0)
            head.fixed_bytes = max(0, len(record.body) - _size(body, "itb", 0))
        else:
            head.chain_bytes = _size(body, "chain", 0) + len(record.body)
            head.snapshot_bytes = _size(body, "snap", 0)
            head.fixed_bytes = _size(body, "fix", head.snapshot_bytes)
        meta = body.get("meta")
        head.meta = dict(meta) if isinstance(meta, dict) else {}
        if is_running_time(head.meta.get(USAGE)):
            read = [] if record.base_seq == record.seq else chain  # ``bodies`` ends with the head
            head.usage = await self.usage_before(
                thread, head.record, head.meta[USAGE], list(zip(read, bodies[:-1], strict=True))
            )
        return level, {r.id for r in level.pending}

    async def usage_before(
        self,
        thread: str,
        head: CheckpointRecord,
        stored: float,
        chain: Sequence[tuple[CheckpointRecord, dict[str, Any]]] = (),
    ) -> dict[str, Any] | None:
        """The whole usage totals as of ``head``, whose metadata holds only the running
        seconds ``stored``: those of the nearest earlier checkpoint that holds them (in the
        delta ``chain`` read with it, else read one by one), counted anew past a run's input
        (`usage_as_of`).

        Every call's last checkpoint holds them whole, so this reads at most the checkpoints
        of one call. None when no earlier checkpoint holds them (the rows are gone).
        """
        bodies = {r.id: b for r, b in chain}
        new_run = head.source == "input"
        parent = head.parent_id
        while parent is not None:
            body = bodies.get(parent)
            record = None
            if body is None:
                record = await self.store.get_checkpoint(thread, parent)
                if record is None:
                    return None
                body = self.decode(record)
            meta = body.get("meta")
            earlier = meta.get(USAGE) if isinstance(meta, dict) else None
            if isinstance(earlier, Mapping):
                return usage_as_of(stored, earlier, new_run=new_run)
            if not is_running_time(earlier):
                return None
            if record is None:
                record = next(r for r, _ in chain if r.id == parent)
            new_run = new_run or record.source == "input"
            parent = record.parent_id
        return None

    async def read(self, thread: str, head: Head) -> tuple[Level, bool]:
        """The level stored at ``head``, and whether the App keeps it (then the caller must
        not change it, and hands out copies only).

        The App keeps the last states it read (`READ_CACHE_THREADS`, `READ_CACHE_BYTES`),
        keyed by checkpoint. ``head`` was just read from the store, so a kept state is used
        only if it is that very checkpoint, or an earlier one of the same delta chain: then
        only the deltas written since are read and applied. Whatever another process wrote
        is therefore seen, and a checkpoint's content never changes once written, so a kept
        state is never stale.

        A thread read for the first time is rebuilt from the store and handed over whole (the
        caller may keep it, nothing else holds it); what the App keeps of it is the rows it
        was rebuilt from. Read again, it is rebuilt from those rows (and any written since)
        and kept decoded.
        """
        record = head.record
        cached = self._reads.pop(thread, None)
        if cached is not None:
            self._read_bytes -= cached.weight
            if cached.level is None:
                kept = await self._descends(thread, cached, head)
                if kept is not None:
                    level, _ = await self.load(thread, head, rows=_Rows(self.store, kept))
                    if not head.migrated:
                        weight = head.snapshot_bytes + head.chain_bytes
                        self._keep(thread, _Read(record, level, head.meta, weight))
                        return level, True
                    return level, False
            elif cached.record.id == record.id and cached.record.body == record.body:
                head.meta = cached.meta
                self._keep(thread, cached)
                return cached.level, True
            else:
                advanced = await self._advance(thread, cached, head)
                if advanced is not None and advanced.level is not None:
                    self._keep(thread, advanced)
                    return advanced.level, True
        rows = _Rows(self.store)
        level, _ = await self.load(thread, head, rows=rows)
        if not head.migrated:
            rows.kept[record.seq] = record
            weight = sum(len(r.body) for r in rows.kept.values())
            self._keep(thread, _Read(record, None, {}, weight, rows=rows.kept))
        return level, False

    async def _descends(
        self, thread: str, cached: _Read, head: Head
    ) -> dict[int, CheckpointRecord] | None:
        """The rows kept of ``cached``, and those written since, if ``head`` is that same
        checkpoint or descends from it; None otherwise (the thread was deleted and written
        again, or moved to another branch), when the rows kept may not be used."""
        assert cached.rows is not None
        record, old = head.record, cached.record
        if record.id == old.id:
            return cached.rows if record.body == old.body else None
        if record.seq <= old.seq:
            return None
        rows = await self.store.checkpoint_range(thread, lo=old.seq + 1, hi=record.seq - 1)
        by_id = {r.id: r for r in rows}
        cur = record.parent_id
        while cur != old.id:
            r = by_id.get(cur) if cur is not None else None
            if r is None:
                return None
            cur = r.parent_id
        return {**cached.rows, **{r.seq: r for r in rows}}

    def forget(self, thread: str) -> None:
        """Drop what `read` keeps of ``thread``."""
        cached = self._reads.pop(thread, None)
        if cached is not None:
            self._read_bytes -= cached.weight

    def _keep(self, thread: str, read: _Read) -> None:
        if read.weight > READ_CACHE_BYTES:
            return
        self._reads[thread] = read
        self._read_bytes += read.weight
        while len(self._reads) > READ_CACHE_THREADS or self._read_bytes > READ_CACHE_BYTES:
            _, oldest = self._reads.popitem(last=False)
            self._read_bytes -= oldest.weight

    async def _advance(self, thread: str, cached: _Read, head: Head) -> _Read | None:
        """``cached`` moved on to ``head`` by the deltas between them; None if it cannot be."""
        assert cached.level is not None
        record, old = head.record, cached.record
        if not (record.base_seq == old.base_seq and old.seq < record.seq):
            return None  # another chain (a snapshot since), or not a later checkpoint
        rows: Sequence[CheckpointRecord] = ()
        if record.seq - old.seq > 1:
            rows = await self.store.checkpoint_range(thread, lo=old.seq + 1, hi=record.seq - 1)
        by_id = {r.id: r for r in rows}
        chain: list[CheckpointRecord] = []
        cur = record.parent_id
        while cur != old.id:
            r = by_id.get(cur) if cur is not None else None
            if r is None or r.seq <= old.seq:
                return None  # not a descendant of the cached checkpoint: read it all again
            chain.append(r)
            cur = r.parent_id
        chain.reverse()
        bodies = [*self.decode_chain(chain), self.decode(record)]
        if any(b.get("fp") != self.plan.fingerprint for b in bodies):
            return None  # written by another graph: `load` migrates or refuses it
        level = level_from_wire(self.plan, bodies[-1], thread=thread, channels=False)
        level.channels = cached.level.channels  # the cached level is dropped: its channels move
        _apply_deltas(level, bodies, record)
        for ch in level.channels.values():
            ch.mark()
        meta = bodies[-1].get("meta")
        head.meta = dict(meta) if isinstance(meta, dict) else {}
        weight = cached.weight + sum(len(r.body) for r in chain) + len(record.body)
        return _Read(record, level, head.meta, weight)

    async def _resolve(
        self,
        thread: str,
        base: CheckpointRecord,
        body: dict[str, Any],
        known: Mapping[int, tuple[CheckpointRecord, dict[str, Any]]] | None = None,
        source: Store | _Rows | None = None,
    ) -> tuple[dict[str, Any], dict[str, list[tuple[int, int]]]]:
        """A base snapshot's body with the items it shares read back in, and what it shares.

        Returns the body with each ``("seg", [refs, items])`` entry replaced by the whole list
        (``("set", ...)``), and for each list key the ``(seq, count)`` references a later
        snapshot may name: ``refs`` plus this snapshot's own items. The snapshots named are
        read (or taken from ``known``, rows already decoded) and must be earlier snapshots of
        the thread, written by the same graph, holding exactly ``count`` items of the key.
        """
        shared: dict[str, list[tuple[int, int]]] = {}
        segs: dict[str, tuple[list[tuple[int, int]], list[Any]]] = {}
        for key, entry in body["ch"].items():
            if not (isinstance(entry, list) and len(entry) == 2):
                continue  # applying it names the damage
            op, payload = entry
            if op == "seg":
                refs, items = _segment(base, key, payload)
                segs[key] = refs, items
                shared[key] = [*refs, (base.seq, len(items))] if items else refs
            elif op == "set" and isinstance(payload, list) and payload:
                shared[key] = [(base.seq, len(payload))]
        if not segs:
            return body, shared
        wanted = sorted({seq for refs, _ in segs.values() for seq, _ in refs})
        named = {seq: known[seq] for seq in wanted if known is not None and seq in known}
        if len(named) < len(wanted):
            rows = await (source or self.store).checkpoints_at(
                thread, [s for s in wanted if s not in named]
            )
            named.update(
                (r.seq, (r, b)) for r, b in zip(rows, self.decode_chain(rows), strict=True)
            )
        gone = [seq for seq in wanted if seq not in named]
        if gone:
            raise _broken_share(base, f"the snapshot {gone[0]} it names is missing")
        channels = dict(body["ch"])
        for key, (refs, items) in segs.items():
            whole: list[Any] = []
            for seq, count in refs:
                row, ref = named[seq]
                if row.base_seq != row.seq or ref.get("fp") != body.get("fp"):
                    raise _broken_share(base, f"checkpoint {row.id} it names is not a snapshot")
                own = _own_items(ref["ch"].get(key))
                if own is None or len(own) != count:
                    raise _broken_share(
                        base, f"snapshot {row.id} does not hold the {count} items of {key!r}"
                    )
                whole.extend(own)
            whole.extend(items)
            channels[key] = ["set", whole]
        return {**body, "ch": channels}, shared

    async def load_many(
        self, thread: str, records: Sequence[CheckpointRecord]
    ) -> list[tuple[Level, dict[str, Any]]]:
        """Rebuild several checkpoints of one thread (a history page), reading each row once."""
        if not records:
            return []
        lo = min(r.base_seq for r in records)
        hi = max(r.seq for r in records)
        rows = await self.store.checkpoint_range(thread, lo=lo, hi=hi)
        # The page's chains cover the range (a thread's checkpoints form one line): decode it
        # as one batch, as `load` does a chain.
        bodies = dict(zip([r.id for r in rows], self.decode_chain(rows), strict=True))

        def body_of(r: CheckpointRecord) -> dict[str, Any]:
            if r.id not in bodies:  # not in the range read (the thread moved meanwhile)
                bodies[r.id] = self.decode(r)
            return bodies[r.id]

        known = {r.seq: (r, bodies[r.id]) for r in rows}
        resolved: dict[str, dict[str, Any]] = {}

        async def base_of(r: CheckpointRecord) -> dict[str, Any]:
            """A base snapshot's body with what it shares read back in (once per page)."""
            if r.id not in resolved:
                resolved[r.id], _ = await self._resolve(thread, r, body_of(r), known)
            return resolved[r.id]

        levels = []
        for record in records:
            body = body_of(record)
            level = level_from_wire(self.plan, body, thread=thread, channels=False)
            if record.base_seq != record.seq:
                ancestry = _ancestry(record, rows)
                chain = [await base_of(ancestry[0]), *(body_of(r) for r in ancestry[1:]), body]
            else:
                chain = [await base_of(record)]
            if body.get("fp") == self.plan.fingerprint:
                _apply_deltas(level, chain, record)
            else:  # written before a migration: shown through it, or refused
                migrate = self.migrations.get(str(body.get("fp")))
                if migrate is None:
                    raise GraphChanged(
                        thread=thread, stored=str(body.get("fp")), current=self.plan.fingerprint
                    )
                self._migrate(level, chain, record, migrate)
            meta = body.get("meta")
            levels.append((level, dict(meta) if isinstance(meta, dict) else {}))
        return levels

    async def commit(
        self,
        level: Level,
        *,
        thread: str,
        parent: Head | None,
        thread_head: Head | None,
        source: Any,
        status: Any,
        resolutions: Sequence[Resolution],
        known: set[str],
        metadata: Mapping[str, Any],
        fence: Fence | None = None,
        actor: str | None = None,
        durable: bool = True,
        decisions: Sequence[Decision] = (),
        audit: Sequence[AuditEntry] = (),
    ) -> tuple[Head, int | None]:
        """Write ``level`` as the thread's next checkpoint (after ``parent``).

        New pending interrupts go into the store's index in the same transaction, and every
        interrupt raised or resolved, and every edit, into the audit log (after them, the
        caller's own ``audit`` entries). ``known`` is updated with the new interrupts. Returns
        the new head and the fencing token held after it.
        """
        starter = metadata.get("started_by")
        if type(starter) is str and level.pending:
            # A new question records who started its run: separation of duties is checked
            # against it by whichever process decides (see `check_authority`).
            for r in level.pending:
                if r.id not in known and r.interrupt.started_by is None:
                    r.interrupt = msgspec.structs.replace(r.interrupt, started_by=starter)
        seq = thread_head.record.seq + 1 if thread_head else 1
        # A small state is cheaper to store whole than to rebuild from a chain on load.
        small = parent is None or parent.snapshot_bytes + parent.chain_bytes <= SNAPSHOT_SMALL_BYTES
        snapshot = (
            small
            or parent is None
            # Loaded through a migration: the chain behind it was written by another graph.
            or parent.migrated
            or parent.chain_bytes >= max(SNAPSHOT_MIN_BYTES, 2 * parent.fixed_bytes)
            or seq - parent.record.base_seq >= SNAPSHOT_MAX_CHAIN
        )
        # A snapshot names what earlier snapshots of this thread's chain hold of its lists;
        # not a small state's (one read loads it), nor the first of a thread (a fork's lists
        # are held by another thread), nor one after a migration (written by another graph).
        segmented = snapshot and not small and parent is not None and not parent.migrated
        body = level_to_wire(level, full=snapshot, segmented=segmented)
        body["meta"] = metadata
        # The body records the chain length *before* itself; readers add its own size.
        if not snapshot:
            assert parent is not None
            body["chain"] = parent.chain_bytes
            body["snap"] = parent.snapshot_bytes
            if parent.fixed_bytes != parent.snapshot_bytes:
                body["fix"] = parent.fixed_bytes
        elif parent is None or not small:
            # What of this snapshot later ones name instead of copying: its fixed bytes are
            # the rest. (A small state's next checkpoint is a snapshot whatever they are.)
            body["itb"] = self._items_bytes(body, level)
            if segmented and any(e[0] == "seg" for e in body["ch"].values()):
                assert parent is not None
                body["shb"] = parent.snapshot_bytes
        data = self._encode(body, level)
        if snapshot:
            chain, snap, base_seq = 0, len(data) + body.get("shb", 0), seq
            fixed = max(0, len(data) - body.get("itb", 0))
        else:
            assert parent is not None
            chain, snap, fixed, base_seq = (
                parent.chain_bytes + len(data),
                parent.snapshot_bytes,
                parent.fixed_bytes,
                parent.record.base_seq,
            )
        record = CheckpointRecord(
            thread=thread,
            id=f"{seq:010d}-{new_id()}",
            parent_id=parent.record.id if parent else None,
            seq=seq,
            step=level.step,
            base_seq=base_seq,
            created_at=time.time(),
            source=source,
            status=status,
            body=data,
        )
        fresh = [r for r in level.pending if r.id not in known] if level.pending else []
        rows = [self._interrupt_row(r, thread, record.id) for r in fresh]
        gone = [i for i in dict.fromkeys(level.dropped) if i in known] if level.dropped else []
        if gone:
            resolutions = [*resolutions, *cancellations(gone)]
        entries: list[AuditEntry] = []
        if source == "fork" and "forked_from" in metadata:
            # A branch's log starts with where it came from (the source's log says it next).
            entries.append(fork_entry(metadata, thread, record.id))
        if fresh or resolutions or decisions or source == "update":
            entries.extend(self._raised_entry(r) for r in fresh)
            # Every approval of a quorum has its own entry, the last one's before the
            # decision that resolves the interrupt.
            entries.extend(_approval_entry(d) for d in decisions if _is_approval(d))
            decided = {d.interrupt_id: d for d in decisions if d.final}
            entries.extend(_resolved_entry(r, decided.get(r.id), actor) for r in resolutions)
            if source == "update":
                edit = {"checkpoint": record.id, "as_node": metadata.get("as_node")}
                entries.append(AuditEntry(kind="edit", actor=actor, data=to_json(edit)))
        entries.extend(audit)
        token = await self.store.append_checkpoint(
            record,
            expected_head=thread_head.record.id if thread_head else None,
            new_interrupts=rows,
            resolutions=resolutions,
            fence=fence,
            audit=entries,
            durable=durable,
        )
        if fresh:
            known.update(r.id for r in fresh)
        if gone:
            known.difference_update(gone)
        if level.dropped:
            level.dropped.clear()
        for ch in level.channels.values():
            if ch.dirty:
                ch.mark()
            if snapshot and isinstance(ch, AppendChannel):
                ch.stored_at(seq, segmented=segmented)
        if fresh or decisions:
            committed(level, thread, fresh, decisions)
        if level.answered:
            level.answered.clear()
        # chain/snap above describe the state *after* this body (what the next commit needs).
        head = Head(
            record, chain_bytes=chain, snapshot_bytes=snap, fixed_bytes=fixed, meta=dict(metadata)
        )
        return head, token

    async def commit_failed(
        self, thread: str, head: Head, *, metadata: Mapping[str, Any], fence: Fence
    ) -> CheckpointRecord:
        """Write a ``failed`` checkpoint after ``head`` that changes nothing else.

        It is built from the stored body alone, never through the graph: the graph may be the
        very reason the thread cannot go on (`GraphChanged`). Its body is ``head``'s with no
        channel deltas (the state is ``head``'s), the same tasks, answers and fingerprint, and
        ``metadata``; a later resume loads it as it would have loaded ``head``.
        """
        record = head.record
        body = dict(self.decode(record))
        if record.base_seq == record.seq:
            chain = 0
            snap = len(record.body) + _size(body, "shb", 0)
            fixed = max(0, len(record.body) - _size(body, "itb", 0))
        else:
            chain = _size(body, "chain", 0) + len(record.body)
            snap = _size(body, "snap", 0)
            fixed = _size(body, "fix", snap)
        for key in ("itb", "shb", "fix"):  # a snapshot's own sizes, or the parent's
            body.pop(key, None)
        body.update(ch={}, meta=dict(metadata), chain=chain, snap=snap)
        if fixed != snap:
            body["fix"] = fixed
        failed = CheckpointRecord(
            thread=thread,
            id=f"{record.seq + 1:010d}-{new_id()}",
            parent_id=record.id,
            seq=record.seq + 1,
            step=record.step,
            base_seq=record.base_seq,
            created_at=time.time(),
            source="loop",
            status="failed",
            body=self.codec.encode(body, path="checkpoint"),
        )
        await self.store.append_checkpoint(
            failed,
            expected_head=record.id,
            new_interrupts=(),
            resolutions=(),
            fence=fence,
            audit=(),
        )
        self.forget(thread)
        return failed

    def _raised_entry(self, r: Raised) -> AuditEntry:
        i = r.interrupt
        data = {
            "interrupt": i.id,
            "address": str(i.address),
            "kind": i.kind,
            "key": i.key,
            "payload_hash": payload_hash(self.codec, i),
        }
        return AuditEntry(kind="interrupt", actor=None, data=to_json(data))

    def _migrate(
        self,
        level: Level,
        bodies: Sequence[dict[str, Any]],
        record: CheckpointRecord,
        migrate: Migration,
    ) -> None:
        """Replay old bodies into plain values, carry them over with ``migrate``, set them."""
        old: dict[str, Any] = {}
        try:
            for body in bodies:
                for key, (op, payload) in body["ch"].items():
                    if op == "set":
                        old[key] = payload
                    elif op == "del":
                        old.pop(key, None)
                    elif op == "ext":
                        old[key] = [*old.get(key, ()), *payload]
                    else:
                        raise ValueError(f"unknown channel operation {op!r}")
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointCorrupt(
                f"checkpoint {record.id} of thread {record.thread!r} has invalid state deltas: "
                f"{exc}",
                thread=record.thread,
                checkpoint_id=record.id,
            ) from exc
        stored = str(bodies[-1].get("fp"))
        try:
            new = migrate(old)
        except Exception as exc:
            raise GraphChanged(
                thread=record.thread,
                stored=stored,
                current=self.plan.fingerprint,
                detail=f"its migration raised {type(exc).__name__}: {exc}",
            ) from exc
        unknown = sorted(set(new) - set(level.channels)) if isinstance(new, dict) else None
        if unknown is None or unknown:
            raise GraphChanged(
                thread=record.thread,
                stored=stored,
                current=self.plan.fingerprint,
                detail=(
                    "its migration must return a dict of the new state's keys"
                    + (f"; unknown keys {unknown}" if unknown else "")
                ),
            )
        for key, value in new.items():
            level.channels[key].apply("set", value)

    def _interrupt_row(self, r: Raised, thread: str, checkpoint_id: str) -> InterruptRecord:
        i = r.interrupt
        return InterruptRecord(
            id=i.id,
            thread=thread,
            checkpoint_id=checkpoint_id,
            key=i.key,
            address=str(i.address),
            kind=i.kind,
            status="pending",
            created_at=i.created_at,
            deadline=i.deadline,
            tool=next((seg.name for seg in reversed(i.address) if seg.kind == "tool"), None),
            # What an inbox shows; the engine's own record of it is in the checkpoint (also
            # a quorum's progress, which `quorum_progress` reads: see decision 49).
            body=self._row_bytes(i),
        )

    def _row_bytes(self, i: Interrupt) -> bytes:
        """`_row_body` encoded, its question and schema each checked by one census in C."""
        body = _row_body(i)
        codec = self.codec
        try:
            ready = [codec.prepare_tree(body[0], 1), codec.prepare_tree(body[1], 1)]
            ready.extend(codec.prepare(x, 1) for x in body[2:])
            return codec.encode_prepared(ready, path="interrupt")
        except (ValueError, OverflowError, UnicodeEncodeError):
            return codec.encode(body, path="interrupt")  # explains what it refuses

    def interrupts_of(self, rows: Sequence[InterruptRecord]) -> list[Interrupt]:
        """Turn rows of the store's interrupt index into `Interrupt` objects, a page at once.

        The cyclic garbage collector is paused while the page is built (see `_collector`).
        """
        with collector_paused():
            try:
                bodies = self.codec.decode_page([row.body for row in rows])
                parse = Address.parse
                # [info, schema], the common case, is built here (a call of `_interrupt` per
                # row cost as much again); a quorum's goes through its checks.
                return [
                    Interrupt(
                        id=row.id,
                        thread=row.thread,
                        key=row.key,
                        address=parse(row.address),
                        kind=row.kind,
                        info=body[0],
                        schema=body[1],
                        created_at=row.created_at,
                        deadline=row.deadline,
                        status=row.status,
                    )
                    if type(body) is list and len(body) == 2
                    else _interrupt(row, parse(row.address), *body)
                    if type(body) is list and len(body) in (3, 5)
                    else interrupt_of(self.codec, row)  # raises: the body is not such a list
                    for row, body in zip(rows, bodies, strict=True)
                ]
            except (CheckpointCorrupt, ValueError, TypeError):
                return [self.interrupt_of(row) for row in rows]  # raises for the first bad row

    def interrupt_of(self, row: InterruptRecord) -> Interrupt:
        """Turn a row of the store's interrupt index into an `Interrupt`."""
        return interrupt_of(self.codec, row)

    async def quorum_progress(self, thread: str) -> dict[str, tuple[str, ...]]:
        """Who approved each pending quorum interrupt of ``thread`` so far, by interrupt id.

        Read from the thread's latest checkpoint (its own body only, never the delta chain):
        the index row of an interrupt is written once, when it is raised.
        """
        record = await self.store.get_checkpoint(thread)
        if record is None:
            return {}
        progress: dict[str, tuple[str, ...]] = {}
        try:
            for w in self.decode(record).get("pend", ()):
                if isinstance(w, list) and len(w) in (17, 19):
                    progress[str(w[0])] = raised_from_wire(w, thread).interrupt.approved_by
        except (ValueError, TypeError) as exc:
            raise CheckpointCorrupt(
                f"checkpoint {record.id} of thread {thread!r} has an invalid pending interrupt: "
                f"{exc}",
                thread=thread,
                checkpoint_id=record.id,
            ) from exc
        return progress

    def _items_bytes(self, body: dict[str, Any], level: Level) -> int:
        """The encoded size of the append keys' items a snapshot body holds itself."""
        size = 0
        for key, (op, payload) in body["ch"].items():
            if isinstance(level.channels.get(key), AppendChannel):
                items = payload[1] if op == "seg" else payload
                size += len(self.codec.encode(items, path=f"state.{key}"))
        return size

    def _encode(self, body: dict[str, Any], level: Level) -> bytes:
        try:
            # The body's frame is this module's own plain data: only the state's values, the
            # tasks' inputs and results, the questions and the metadata are walked.
            ready = _prepared(body, self.codec, level.ran_given)
            return self.codec.encode_prepared(ready, path="checkpoint")
        except (ValueError, OverflowError, UnicodeEncodeError):
            pass  # the whole walk below explains what it refuses, or handles what it needs to
        try:
            return self.codec.encode(body, path="checkpoint")
        except UnregisteredType:
            # Find the offending value and name it by its state path.
            for key, delta in body["ch"].items():
                self.codec.encode(delta[1], path=f"state.{key}")
            for tid, s in body.get("scr", {}).items():
                self.codec.encode(s, path=f"task[{_node_of(level, tid)}]")
            for tid, res in body.get("res", {}).items():
                self.codec.encode(res, path=f"task[{_node_of(level, tid)}].writes")
            raise

    def relineage(self, level: Level, lineage: str) -> dict[str, str]:
        """Give a level (and the subgraph levels stored in it) a new lineage.

        Every pending interrupt gets the id it would have had under the new lineage; returns
        ``{old_id: new_id}``.
        """
        renamed: dict[str, str] = {}
        level.lineage = lineage
        _rekey(level.pending, lineage, renamed, level.thread)
        for sc in level.scratch.values():
            for addr, wire in sc.children.items():
                sc.children[addr] = _rekey_wire(wire, lineage, renamed)
        return renamed


# Parts of a checkpoint body (`level_to_wire`) that hold values from the graph, walked by
# `_prepared` at their depth in the body; the rest of the body is plain data of its own.
_GRAPH_PARTS: Final = ("res", "scr", "org", "wr")  # and "pend", question by question
_SCALARS: Final = frozenset({str, float, bool, type(None)})
"""Values `Codec.prepare` gives back as they are, at any depth (ints are checked for size)."""


def _prepared(body: dict[str, Any], codec: Codec, ran: object) -> dict[str, Any]:
    """``body`` as `Codec.encode` would write it, walking only what came from the graph.

    ``ran`` is the list `Level.ran_metadata` handed out last: the engine's own, left as it is
    when it is the metadata's ``ran`` (any other value there is walked).
    Raises ValueError (from `Codec.prepare`) when a part needs the whole walk.
    """
    prepare = codec.prepare
    ready = dict(body)
    ready["ch"] = {key: [d[0], prepare(d[1], 3)] for key, d in body["ch"].items()}
    ready["tasks"] = [
        t if t[4] is None else [t[0], t[1], t[2], t[3], prepare(t[4], 3), t[5]]
        for t in body["tasks"]
    ]
    for part in _GRAPH_PARTS:
        if part in body:
            ready[part] = prepare(body[part], 1)
    if "pend" in body:
        # A question and its answer schema are JSON trees of many small dicts: each gets one
        # census in C (`prepare_tree`) instead of a walk dict by dict.
        tree = codec.prepare_tree
        ready["pend"] = [
            [*w[:4], tree(w[4], 3), tree(w[5], 3), *(prepare(x, 3) for x in w[6:])]
            for w in body["pend"]
        ]
    meta = body.get("meta")
    if meta:
        # Metadata values are plain data nearly always (usage sums, an actor, a trace id):
        # scalars are left as they are, trees get a census (`prepare_tree`).
        tree = codec.prepare_tree
        ready["meta"] = (
            {
                key: value if value is ran or type(value) in _SCALARS else tree(value, 2)
                for key, value in meta.items()
            }
            if all(type(key) is str for key in meta)
            else prepare(meta, 1)
        )
    return ready


def _is_approval(d: Decision) -> bool:
    """True for an approval of a quorum: a vote, or the last approval, which resolves it.

    Invariant: a final decision whose ``approved_by`` holds every approval needed is the last
    approval (any other decision leaves the interrupt before the quorum is complete).
    """
    return d.approvals > 1 and (not d.final or len(d.approved_by) >= d.approvals)


def _approval_entry(d: Decision) -> AuditEntry:
    """The audit entry of one person's approval of an interrupt that needs several."""
    data: dict[str, Any] = {
        "interrupt": d.interrupt_id,
        "answer": d.answer,
        "approved_by": list(d.approved_by),
        "approvals": d.approvals,
        "reason": d.reason,
        "nonce": d.nonce,
        "payload_hash": d.payload_hash,
    }
    if d.override is not None:
        data["override"] = d.override
    return AuditEntry(kind="approval", actor=d.actor, data=to_json(data))


def _resolved_entry(res: Resolution, decision: Decision | None, actor: str | None) -> AuditEntry:
    """The audit entry of an interrupt leaving ``pending`` (with its decision, if answered)."""
    data: dict[str, Any] = {"interrupt": res.id, "status": res.status}
    if decision is not None:
        data.update(
            answer=decision.answer,
            reason=decision.reason,
            nonce=decision.nonce,
            payload_hash=decision.payload_hash,
        )
        if decision.details is not None:
            data["details"] = decision.details
        if decision.override is not None:
            data["override"] = decision.override  # an admin decided outside its authority
        if decision.approvals > 1:
            data.update(approvals=decision.approvals, approved_by=list(decision.approved_by))
        actor = decision.actor or actor
    kind: AuditKind
    if res.status == "expired":
        kind = "expired"
    elif res.status == "cancelled":
        kind = "cancelled"
    else:  # "resolved" (a resolution never moves an interrupt back to "pending")
        kind = "decision"
    return AuditEntry(kind=kind, actor=actor, data=to_json(data))


def dropped_entry(
    decided: Mapping[str, str], checkpoint: str, actor: str | None = None
) -> AuditEntry:
    """The audit entry of decided interrupts whose tasks are dropped before they ran.

    Args:
        decided: ``{interrupt_id: node}`` of the decisions dropped.
        checkpoint: The checkpoint that still holds them (time travel can pick them up).
        actor: Who dropped them, if known.
    """
    data = {
        "interrupts": list(decided),
        "nodes": list(dict.fromkeys(decided.values())),
        "checkpoint": checkpoint,
    }
    return AuditEntry(kind="dropped", actor=actor, data=to_json(data))


def fork_entry(metadata: Mapping[str, Any], thread: str, checkpoint: str) -> AuditEntry:
    """The ``fork`` audit entry of branch ``thread``, whose first checkpoint is ``checkpoint``
    (its ``metadata`` says where it came from, who forked it, how, and what was edited)."""
    origin = metadata["forked_from"]
    data = {
        "source": {"thread": origin["thread"], "checkpoint": origin["checkpoint"]},
        "branch": {"thread": thread, "checkpoint": checkpoint},
        "as_node": metadata.get("as_node"),
        "edited": list(metadata.get("edited", ())),
    }
    return AuditEntry(kind="fork", actor=metadata.get("actor"), data=to_json(data))


def to_json(value: Any) -> bytes:
    """Audit data as JSON; values JSON cannot hold are written as their ``repr``."""
    return msgspec.json.encode(value, enc_hook=repr)


def _apply_deltas(level: Level, bodies: Sequence[dict[str, Any]], record: CheckpointRecord) -> None:
    """Apply bodies' channel deltas in order; anything malformed is `CheckpointCorrupt`."""
    try:
        for body in bodies:
            apply_channels(level, body["ch"])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CheckpointCorrupt(
            f"checkpoint {record.id} of thread {record.thread!r} has invalid state deltas: {exc}",
            thread=record.thread,
            checkpoint_id=record.id,
        ) from exc


def cancellations(ids: Iterable[str]) -> list[Resolution]:
    """Resolutions that cancel the given interrupts on the record, now."""
    now = time.time()
    return [Resolution(id=i, status="cancelled", resolved_at=now, resolution=None) for i in ids]


def _node_of(level: Level, tid: str) -> str:
    return next((t.node for t in level.tasks if t.id == tid), tid)


def _rekey(pending: list[Raised], lineage: str, renamed: dict[str, str], thread: str = "") -> None:
    for r in pending:
        new = interrupt_id(lineage, r.task, r.local)
        renamed[r.id] = new
        r.interrupt = msgspec.structs.replace(r.interrupt, id=new, thread=thread)


def _rekey_wire(wire: dict[str, Any], lineage: str, renamed: dict[str, str]) -> dict[str, Any]:

    wire = dict(wire)
    wire["lin"] = lineage
    pend = [raised_from_wire(w) for w in wire.get("pend", [])]
    _rekey(pend, lineage, renamed)
    if pend:
        wire["pend"] = [raised_to_wire(r) for r in pend]
    scr = {}
    for tid, s in wire.get("scr", {}).items():
        s = dict(s)
        if "children" in s:
            s["children"] = {a: _rekey_wire(w, lineage, renamed) for a, w in s["children"].items()}
        scr[tid] = s
    if scr:
        wire["scr"] = scr
    return wire


def _share(level: Level, shared: Mapping[str, list[tuple[int, int]]]) -> None:
    """Tell the append channels of a level just rebuilt from a snapshot what it shares."""
    for key, refs in shared.items():
        ch = level.channels.get(key)
        if isinstance(ch, AppendChannel):
            ch.shared = list(refs)
            ch.shared_len = sum(count for _, count in refs)


def _segment(
    base: CheckpointRecord, key: str, payload: Any
) -> tuple[list[tuple[int, int]], list[Any]]:
    """The ``(refs, items)`` of a snapshot's ``("seg", ...)`` entry, checked."""
    if not (isinstance(payload, list) and len(payload) == 2):
        raise _broken_share(base, f"its entry for {key!r} is malformed")
    raw, items = payload
    if not isinstance(raw, list) or not raw or not isinstance(items, list):
        raise _broken_share(base, f"its entry for {key!r} is malformed")
    refs: list[tuple[int, int]] = []
    last = 0
    for ref in raw:
        if not (
            isinstance(ref, list)
            and len(ref) == 2
            and all(type(n) is int for n in ref)
            and last < ref[0] < base.seq
            and ref[1] > 0
        ):
            raise _broken_share(base, f"it names {ref!r} for {key!r}")
        last = ref[0]
        refs.append((ref[0], ref[1]))
    return refs, items


def _own_items(entry: Any) -> list[Any] | None:
    """The items of an append key a snapshot holds itself (None: not a snapshot entry)."""
    if not (isinstance(entry, list) and len(entry) == 2):
        return None
    op, payload = entry
    if op == "set" and isinstance(payload, list):
        return payload
    if op == "seg" and isinstance(payload, list) and len(payload) == 2:
        items = payload[1]
        return items if isinstance(items, list) else None
    return None


def _broken_share(base: CheckpointRecord, detail: str) -> CheckpointCorrupt:
    return CheckpointCorrupt(
        f"snapshot {base.id} of thread {base.thread!r} is damaged: {detail}",
        thread=base.thread,
        checkpoint_id=base.id,
    )


def _size(body: dict[str, Any], key: str, default: int) -> int:
    """A size hint a body records (for the snapshot rules only): ``default`` if not an int."""
    value = body.get(key, default)
    return value if type(value) is int and value >= 0 else default


def _checked_body(record: CheckpointRecord, body: Any) -> dict[str, Any]:
    """``body`` if it has the shape of a checkpoint body; otherwise `CheckpointCorrupt`."""
    if not isinstance(body, dict) or "ch" not in body or not isinstance(body["ch"], dict):
        raise CheckpointCorrupt(
            f"checkpoint {record.id} of thread {record.thread!r} is not a checkpoint body",
            thread=record.thread,
            checkpoint_id=record.id,
        )
    return body


def _ancestry(record: CheckpointRecord, rows: Sequence[CheckpointRecord]) -> list[CheckpointRecord]:
    """The checkpoints from ``record``'s base snapshot up to its parent, oldest first."""
    by_id = {r.id: r for r in rows}
    out: list[CheckpointRecord] = []
    cur = record.parent_id
    while True:
        r = by_id.get(cur) if cur is not None else None
        if r is None:
            raise CheckpointCorrupt(
                f"checkpoint {record.id} of thread {record.thread!r}: its delta chain is broken "
                f"at {cur!r} (base seq {record.base_seq})",
                thread=record.thread,
                checkpoint_id=record.id,
            )
        out.append(r)
        if r.seq == record.base_seq:
            break
        cur = r.parent_id
    out.reverse()
    return out


def interrupt_of(codec: Codec, row: InterruptRecord) -> Interrupt:
    """Turn a row of the store's interrupt index into an `Interrupt`, decoded with ``codec``.

    The row's body is ``[info, schema]``, ``[info, schema, approvals]`` for a quorum, or
    ``[info, schema, approvals, authority, started_by]`` for a question that says who may
    decide it or whose starter is known (see `_row_body`). Who
    approved so far is not in the row (see `ThreadIO.quorum_progress`).

    Raises:
        CheckpointCorrupt: The row cannot be read (damaged, or types ``codec`` lacks).
    """
    try:
        body = codec.decode(row.body)
        if not isinstance(body, list) or len(body) not in (2, 3, 5):
            raise ValueError(
                "the body is not [info, schema], [info, schema, approvals] or "
                "[info, schema, approvals, authority, started_by]"
            )
        address = Address.parse(row.address)
        return _interrupt(row, address, *body)
    except (CheckpointCorrupt, ValueError, TypeError) as exc:
        raise CheckpointCorrupt(
            f"interrupt {row.id} of thread {row.thread!r} has an invalid index row: {exc}",
            thread=row.thread,
            checkpoint_id=row.checkpoint_id,
        ) from exc


def _row_body(i: Interrupt) -> list[Any]:
    """What an interrupt's index row holds: as short a list as says all of it."""
    if i.authority is not None or i.started_by is not None:
        authority = None if i.authority is None else msgspec.to_builtins(i.authority)
        return [i.info, i.schema, i.approvals, authority, i.started_by]
    return [i.info, i.schema] if i.approvals < 2 else [i.info, i.schema, i.approvals]


def _interrupt(
    row: InterruptRecord,
    address: Address,
    info: Any,
    schema: Any,
    approvals: int = 1,
    authority: Any = None,
    started_by: Any = None,
) -> Interrupt:
    if not isinstance(approvals, int) or isinstance(approvals, bool) or approvals < 1:
        raise ValueError(f"an interrupt's approvals must be a positive int, not {approvals!r}")
    if started_by is not None and not isinstance(started_by, str):
        raise ValueError(f"an interrupt's starter must be a str, not {started_by!r}")
    if authority is not None:
        try:
            authority = msgspec.convert(authority, Authority)
        except (msgspec.ValidationError, ValueError) as exc:
            raise ValueError(f"an interrupt's authority is not valid: {exc}") from exc
    return Interrupt(
        id=row.id,
        thread=row.thread,
        key=row.key,
        address=address,
        kind=row.kind,
        info=info,
        schema=schema,
        created_at=row.created_at,
        deadline=row.deadline,
        status=row.status,
        approvals=approvals,
        authority=authority,
        started_by=started_by,
    )
