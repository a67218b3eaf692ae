"""The audit chain: an append-only, hash-chained log per thread (`AuditConformance`)."""

from __future__ import annotations

import pytest

from ..._errors import (
    ThreadBusy,
    UnknownInterrupt,
)
from ...stores._audit import GENESIS, audit_hash, verify_audit
from ...stores._base import (
    Store,
)
from ._common import (
    ConformanceGroup,
    make_checkpoint,
    make_entry,
    make_fence,
    make_interrupt,
    resolve,
)

__all__ = ["AuditConformance"]


class AuditConformance(ConformanceGroup):
    """The audit chain: an append-only, hash-chained log per thread.

    The audit log only grows, and each entry is written with the change it describes. A
    thread's entries form one hash chain that `verify_audit` checks, a refused write leaves no
    entry, and deleting a thread keeps its log, closed with a ``thread_deleted`` entry.
    """

    async def test_audit_entries_chain_per_thread(self, store: Store) -> None:
        one = make_checkpoint("a", 1, status="interrupted")
        await store.append_checkpoint(
            one,
            expected_head=None,
            new_interrupts=[make_interrupt("a-i", one)],
            audit=[make_entry("interrupt", 1)],
        )
        two = make_checkpoint("a", 2)
        await store.append_checkpoint(
            two,
            expected_head=one.id,
            resolutions=[resolve("a-i")],
            audit=[make_entry("decision", 2), make_entry("edit", 3)],
        )
        await store.begin_effect(
            "a", "k", name="x", fence=None, audit=[make_entry("effect_started", 4)]
        )
        await store.append_checkpoint(
            make_checkpoint("b", 1), expected_head=None, audit=[make_entry("interrupt", 5)]
        )
        log = await store.audit_log()
        assert [(r.thread, r.seq, r.kind) for r in log] == [
            ("a", 1, "interrupt"),
            ("a", 2, "decision"),
            ("a", 3, "edit"),
            ("a", 4, "effect_started"),
            ("b", 1, "interrupt"),
        ]
        assert log[0].prev == GENESIS and log[1].prev == log[0].hash
        assert log[0].hash == audit_hash(
            GENESIS, "a", 1, log[0].at, "interrupt", "actor1", b'{"n": 1}'
        )
        assert [r.seq for r in await store.audit_log(thread="a", after=("a", 2))] == [3, 4]
        assert [(r.thread, r.seq) for r in await store.audit_log(after=("a", 4), limit=5)] == [
            ("b", 1)
        ]
        report = await verify_audit(store, page=2)
        assert report.ok and report.entries == 5 and report.threads == 2
        assert report.heads["b"] == log[-1].hash.hex()

    async def test_refused_writes_leave_no_audit_entry(self, store: Store) -> None:
        one = make_checkpoint("t", 1)
        await store.append_checkpoint(one, expected_head=None, fence=make_fence("a", None))
        with pytest.raises(ThreadBusy):
            await store.append_checkpoint(
                make_checkpoint("t", 2), expected_head=one.id, audit=[make_entry("decision", 1)]
            )
        with pytest.raises(UnknownInterrupt):
            await store.append_checkpoint(
                make_checkpoint("t", 2),
                expected_head=one.id,
                fence=make_fence("a", 1),
                resolutions=[resolve("nope")],
                audit=[make_entry("decision", 1)],
            )
        assert await store.audit_log() == []

    async def test_deleting_a_thread_keeps_and_closes_its_audit_log(self, store: Store) -> None:
        await store.append_checkpoint(
            make_checkpoint("t", 1), expected_head=None, audit=[make_entry("interrupt", 1)]
        )
        await store.begin_effect("t", "k", name="x", fence=None)
        await store.delete_thread("t")
        assert await store.get_effect("t", "k") is None
        assert [r.kind for r in await store.audit_log(thread="t")] == [
            "interrupt",
            "thread_deleted",
        ]
        assert (await verify_audit(store)).ok
