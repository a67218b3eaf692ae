"""The audit chain: an append-only, hash-chained log per thread (`AuditConformance`)."""

from __future__ import annotations

import itertools

import anyio
import pytest

from ..._errors import (
    CheckpointNotFound,
    ThreadBusy,
    UnknownInterrupt,
)
from ...stores._audit import GENESIS, audit_hash, verify_audit
from ...stores._base import (
    AuditEntry,
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
    `Store.append_audit` adds entries to an existing thread's chain without a checkpoint,
    serialised with the other writes to it, and refuses an unknown thread or bad arguments.
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

    async def test_append_audit_joins_the_threads_chain(self, store: Store) -> None:
        one = make_checkpoint("t", 1)
        await store.append_checkpoint(one, expected_head=None, audit=[make_entry("edit", 1)])
        await store.append_audit("t", [make_entry("fork", 2), make_entry("fork", 3)])
        await store.append_audit("t", (make_entry("fork", 4),), durable=False)
        await store.append_checkpoint(
            make_checkpoint("t", 2), expected_head=one.id, audit=[make_entry("edit", 5)]
        )
        log = await store.audit_log(thread="t")
        assert [(r.seq, r.kind, r.actor, r.data) for r in log] == [
            (1, "edit", "actor1", b'{"n": 1}'),
            (2, "fork", "actor2", b'{"n": 2}'),
            (3, "fork", "actor3", b'{"n": 3}'),
            (4, "fork", "actor4", b'{"n": 4}'),
            (5, "edit", "actor5", b'{"n": 5}'),
        ]
        assert all(b.prev == a.hash for a, b in itertools.pairwise(log))
        report = await verify_audit(store)
        assert report.ok and report.entries == 5
        # The checkpoints are those appended: an audit append writes none.
        head = await store.get_thread("t")
        assert head is not None and head.head_seq == 2

    async def test_concurrent_audit_appends_keep_one_chain(self, store: Store) -> None:
        one = make_checkpoint("t", 1)
        await store.append_checkpoint(one, expected_head=None)

        async def note(n: int) -> None:
            await store.append_audit("t", [make_entry("fork", n), make_entry("fork", n + 100)])

        async with anyio.create_task_group() as tg:
            for n in range(8):
                tg.start_soon(note, n)
            tg.start_soon(
                lambda: store.append_checkpoint(
                    make_checkpoint("t", 2), expected_head=one.id, audit=[make_entry("edit", 99)]
                )
            )
        log = await store.audit_log(thread="t")
        assert [r.seq for r in log] == list(range(1, 18))
        assert (await verify_audit(store)).ok

    async def test_append_audit_refuses_a_thread_that_does_not_exist(self, store: Store) -> None:
        with pytest.raises(CheckpointNotFound) as info:
            await store.append_audit("ghost", [make_entry("fork", 1)])
        assert info.value.thread == "ghost"
        await store.append_checkpoint(
            make_checkpoint("gone", 1), expected_head=None, audit=[make_entry("edit", 1)]
        )
        await store.delete_thread("gone")
        with pytest.raises(CheckpointNotFound):
            await store.append_audit("gone", [make_entry("fork", 2)])
        assert [(r.thread, r.kind) for r in await store.audit_log()] == [
            ("gone", "edit"),
            ("gone", "thread_deleted"),
        ]

    async def test_append_audit_refuses_bad_arguments(self, store: Store) -> None:
        await store.append_checkpoint(make_checkpoint("t", 1), expected_head=None)
        lone = "\ud800"
        with pytest.raises(ValueError, match="at least one entry"):
            await store.append_audit("t", [])
        with pytest.raises(TypeError, match="list or tuple"):
            await store.append_audit("t", make_entry("fork", 1))  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"entries\[1\] must be an AuditEntry"):
            await store.append_audit("t", [make_entry("fork", 1), {"kind": "fork"}])  # type: ignore[list-item]
        with pytest.raises(TypeError, match=r"entries\[0\]\.data must be bytes"):
            await store.append_audit("t", [AuditEntry(kind="fork", actor=None, data="{}")])  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="audit kind 'note'"):
            await store.append_audit("t", [AuditEntry(kind="note", actor=None, data=b"{}")])  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="audit actor"):
            await store.append_audit("t", [AuditEntry(kind="fork", actor=lone, data=b"{}")])
        with pytest.raises(ValueError, match="thread"):
            await store.append_audit(lone, [make_entry("fork", 1)])
        with pytest.raises(TypeError, match="thread"):
            await store.append_audit(None, [make_entry("fork", 1)])  # type: ignore[arg-type]
        assert await store.audit_log() == []
