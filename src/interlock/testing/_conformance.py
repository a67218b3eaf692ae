"""`StoreConformance`: the tests every `Store` backend must pass."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import anyio
import msgspec
import pytest

from .._errors import (
    FencedOut,
    InterruptAlreadyResolved,
    StoreClosed,
    StoreError,
    ThreadBusy,
    UnknownInterrupt,
)
from ..stores._audit import GENESIS, audit_hash, verify_audit
from ..stores._base import (
    AuditEntry,
    CheckpointRecord,
    CheckpointStatus,
    Fence,
    InterruptRecord,
    InterruptStatus,
    Resolution,
    Store,
    ThreadRecord,
)

__all__ = ["StoreConformance"]

_T0 = 1_700_000_000.25
_EVERYTHING = 10**6


def _checkpoint(
    thread: str,
    seq: int,
    *,
    id: str | None = None,
    parent_id: str | None = None,
    status: CheckpointStatus = "ready",
    body: bytes | None = None,
) -> CheckpointRecord:
    return CheckpointRecord(
        thread=thread,
        id=id or f"{thread}.{seq:04d}",
        parent_id=parent_id or (f"{thread}.{seq - 1:04d}" if seq > 1 else None),
        seq=seq,
        step=seq - 2,
        base_seq=seq - (seq - 1) % 4,
        created_at=_T0 + seq,
        source="input" if seq == 1 else "loop",
        status=status,
        body=f"body of {thread} #{seq}".encode() if body is None else body,
    )


def _interrupt(
    id: str,
    at: CheckpointRecord,
    *,
    key: str | None = None,
    created_at: float | None = None,
    deadline: float | None = None,
) -> InterruptRecord:
    return InterruptRecord(
        id=id,
        thread=at.thread,
        checkpoint_id=at.id,
        key=key,
        address=f"node:review/tool:{id}",
        kind="dynamic",
        status="pending",
        created_at=at.created_at if created_at is None else created_at,
        deadline=deadline,
        body=f"interrupt {id}".encode(),
    )


def _fence(owner: str, token: int | None, *, ttl: float = 60.0, release: bool = False) -> Fence:
    return Fence(owner=owner, token=token, ttl=ttl, release=release)


def _entry(kind: str, n: int) -> AuditEntry:
    return AuditEntry(kind=kind, actor=f"actor{n}", data=f'{{"n": {n}}}'.encode())


def _resolve(
    id: str, status: InterruptStatus = "resolved", value: bytes | None = b"ok"
) -> Resolution:
    return Resolution(id=id, status=status, resolved_at=_T0 + 10_000, resolution=value)


async def _grow(
    store: Store, thread: str, n: int, *, interrupts: Sequence[str] = ()
) -> list[CheckpointRecord]:
    """Append ``n`` checkpoints to the thread; the first of them raises ``interrupts``."""
    head = await store.get_thread(thread)
    seq, expected = (0, None) if head is None else (head.head_seq, head.head_id)
    written: list[CheckpointRecord] = []
    for _ in range(n):
        seq += 1
        record = _checkpoint(thread, seq, parent_id=expected)
        new = [_interrupt(i, record) for i in interrupts] if not written else []
        await store.append_checkpoint(record, expected_head=expected, new_interrupts=new)
        written.append(record)
        expected = record.id
    return written


async def _snapshot(store: Store, threads: Sequence[str], interrupts: Sequence[str]) -> object:
    """Everything the store says about these threads and interrupts."""
    return (
        [await store.get_thread(t) for t in threads],
        [await store.checkpoint_range(t, lo=1, hi=_EVERYTHING) for t in threads],
        [await store.get_interrupt(i) for i in interrupts],
        await store.pending(limit=_EVERYTHING),
    )


class StoreConformance:
    """Tests that check a `Store` keeps every clause of the protocol.

    Subclass it in a test module and provide one fixture, ``store``, that yields a fresh, empty
    store and closes it afterwards::

        class TestMyStore(StoreConformance):
            @pytest.fixture
            async def store(self, tmp_path):
                my_store = MyStore(tmp_path / "db")
                yield my_store
                await my_store.close()

    The tests are marked ``anyio`` and run under anyio's pytest plugin: on asyncio unless an
    ``anyio_backend`` fixture of yours says otherwise.
    """

    pytestmark = pytest.mark.anyio

    # Appending and reading back

    async def test_is_a_store(self, store: Store) -> None:
        assert isinstance(store, Store)

    async def test_empty_store_has_nothing(self, store: Store) -> None:
        assert await store.get_thread("t") is None
        assert await store.get_checkpoint("t") is None
        assert await store.get_checkpoint("t", "t.0001") is None
        assert await store.checkpoint_range("t", lo=1, hi=10) == []
        assert await store.list_checkpoints("t") == []
        assert await store.get_interrupt("i") is None
        assert await store.pending() == []

    async def test_append_then_read_head_thread_and_by_id(self, store: Store) -> None:
        first, second, third = await _grow(store, "t", 3)
        assert await store.get_checkpoint("t") == third
        assert await store.get_checkpoint("t", first.id) == first
        assert await store.get_checkpoint("t", second.id) == second
        assert await store.get_thread("t") == ThreadRecord(
            thread="t", head_id=third.id, head_seq=3, status="ready", updated_at=third.created_at
        )

    async def test_checkpoint_of_another_thread_is_absent(self, store: Store) -> None:
        (a,) = await _grow(store, "a", 1)
        await _grow(store, "b", 1)
        assert await store.get_checkpoint("b", a.id) is None
        assert await store.get_checkpoint("a", "no-such-id") is None

    async def test_unusual_values_round_trip(self, store: Store) -> None:
        thread = "thread/ünïcode ✓ 'quoted'"
        first = _checkpoint(thread, 1, id="id ✓ 1", body=b"")
        second = _checkpoint(
            thread, 2, id="id ✓ 2", parent_id=first.id, status="failed", body=bytes(range(256)) * 4
        )
        big = _checkpoint(thread, 3, id="id ✓ 3", parent_id=second.id, body=b"\0x" * 500_000)
        raised = _interrupt("i ✓", second, key="ключ", deadline=_T0 + 0.125)
        plain = _interrupt("plain", second)
        await store.append_checkpoint(first, expected_head=None)
        await store.append_checkpoint(
            second, expected_head=first.id, new_interrupts=[raised, plain]
        )
        await store.append_checkpoint(
            big,
            expected_head=second.id,
            resolutions=[_resolve(raised.id, value=b"\0\xff"), _resolve(plain.id, value=None)],
        )
        assert await store.checkpoint_range(thread, lo=1, hi=3) == [first, second, big]
        resolved = await store.get_interrupt(raised.id)
        assert resolved == msgspec.structs.replace(
            raised, status="resolved", resolved_at=_T0 + 10_000, resolution=b"\0\xff"
        )
        got_plain = await store.get_interrupt(plain.id)
        assert got_plain is not None
        assert got_plain.resolution is None
        assert got_plain.status == "resolved"

    # Reading history

    async def test_checkpoint_range_bounds(self, store: Store) -> None:
        written = await _grow(store, "t", 10)

        async def seqs(lo: int, hi: int) -> list[int]:
            return [c.seq for c in await store.checkpoint_range("t", lo=lo, hi=hi)]

        assert await store.checkpoint_range("t", lo=1, hi=10) == written
        assert await seqs(3, 5) == [3, 4, 5]
        assert await seqs(5, 5) == [5]
        assert await seqs(6, 5) == []
        assert await seqs(0, 2) == [1, 2]
        assert await seqs(9, 100) == [9, 10]
        assert await seqs(11, 20) == []
        assert await store.checkpoint_range("other", lo=1, hi=10) == []

    async def test_list_checkpoints_pages_newest_first(self, store: Store) -> None:
        written = await _grow(store, "t", 250)
        await _grow(store, "other", 3)
        pages: list[list[CheckpointRecord]] = []
        before: int | None = None
        while page := await store.list_checkpoints("t", before_seq=before, limit=50):
            pages.append(page)
            before = page[-1].seq
        assert [len(p) for p in pages] == [50] * 5
        assert [c for p in pages for c in p] == written[::-1]
        assert [c.seq for c in await store.list_checkpoints("t")] == list(range(250, 200, -1))
        assert [c.seq for c in await store.list_checkpoints("t", before_seq=4)] == [3, 2, 1]
        assert [c.seq for c in await store.list_checkpoints("t", limit=2)] == [250, 249]
        assert await store.list_checkpoints("t", before_seq=1) == []
        assert await store.list_checkpoints("t", limit=0) == []

    # Compare-and-set on the head

    async def test_wrong_expected_head_changes_nothing(self, store: Store) -> None:
        first, _, third = await _grow(store, "t", 3, interrupts=["i1"])
        before = await _snapshot(store, ["t"], ["i1", "new"])
        stale = _checkpoint("t", 4, id="stale", parent_id=first.id)
        with pytest.raises(ThreadBusy) as caught:
            await store.append_checkpoint(
                stale,
                expected_head=first.id,
                new_interrupts=[_interrupt("new", stale)],
                resolutions=[_resolve("i1")],
            )
        assert caught.value.thread == "t"
        assert await _snapshot(store, ["t"], ["i1", "new"]) == before
        assert await store.get_checkpoint("t", "stale") is None
        assert (await store.get_checkpoint("t")) == third

    async def test_new_thread_that_exists_is_busy(self, store: Store) -> None:
        await _grow(store, "t", 2)
        before = await _snapshot(store, ["t"], [])
        with pytest.raises(ThreadBusy):
            await store.append_checkpoint(_checkpoint("t", 1, id="again"), expected_head=None)
        with pytest.raises(ThreadBusy):
            await store.append_checkpoint(_checkpoint("t", 3, id="again"), expected_head=None)
        assert await _snapshot(store, ["t"], []) == before

    async def test_expected_head_of_missing_thread_is_busy(self, store: Store) -> None:
        with pytest.raises(ThreadBusy):
            await store.append_checkpoint(_checkpoint("t", 1), expected_head="t.0000")
        assert await _snapshot(store, ["t"], []) == ([None], [[]], [], [])

    async def test_wrong_seq_is_busy(self, store: Store) -> None:
        with pytest.raises(ThreadBusy):
            await store.append_checkpoint(_checkpoint("new", 2), expected_head=None)
        assert await store.get_thread("new") is None
        _, second = await _grow(store, "t", 2)
        before = await _snapshot(store, ["t"], [])
        for seq in (1, 2, 4, 0):
            record = _checkpoint("t", seq, id=f"bad{seq}", parent_id=second.id)
            with pytest.raises(ThreadBusy):
                await store.append_checkpoint(record, expected_head=second.id)
        assert await _snapshot(store, ["t"], []) == before

    # Resolutions

    async def test_resolution_moves_interrupt_out_of_pending(self, store: Store) -> None:
        (first,) = await _grow(store, "t", 1, interrupts=["a", "b"])
        second = _checkpoint("t", 2, status="interrupted")
        await store.append_checkpoint(
            second, expected_head=first.id, resolutions=[_resolve("a", value=b"yes")]
        )
        a = await store.get_interrupt("a")
        assert a is not None
        assert (a.status, a.resolved_at, a.resolution) == ("resolved", _T0 + 10_000, b"yes")
        assert await store.get_interrupt("b") == _interrupt("b", first)
        assert [i.id for i in await store.pending(thread="t")] == ["b"]
        assert [i.id for i in await store.pending()] == ["b"]
        thread = await store.get_thread("t")
        assert thread is not None
        assert (thread.head_id, thread.status) == (second.id, "interrupted")

    async def test_second_resolution_is_refused_with_the_status(self, store: Store) -> None:
        (first,) = await _grow(store, "t", 1, interrupts=["a"])
        second = _checkpoint("t", 2)
        await store.append_checkpoint(
            second, expected_head=first.id, resolutions=[_resolve("a", "expired")]
        )
        before = await _snapshot(store, ["t"], ["a"])
        with pytest.raises(InterruptAlreadyResolved) as caught:
            await store.append_checkpoint(
                _checkpoint("t", 3), expected_head=second.id, resolutions=[_resolve("a")]
            )
        assert (caught.value.interrupt_id, caught.value.status) == ("a", "expired")
        assert await _snapshot(store, ["t"], ["a"]) == before

    async def test_unknown_interrupt_lists_the_pending_ones(self, store: Store) -> None:
        (first,) = await _grow(store, "t", 1, interrupts=["a", "b"])
        await _grow(store, "other", 1, interrupts=["elsewhere"])
        before = await _snapshot(store, ["t", "other"], ["a", "b", "elsewhere"])
        for target in ("ghost", "elsewhere"):
            with pytest.raises(UnknownInterrupt) as caught:
                await store.append_checkpoint(
                    _checkpoint("t", 2), expected_head=first.id, resolutions=[_resolve(target)]
                )
            assert caught.value.target == target
            assert caught.value.thread == "t"
            assert caught.value.pending == ("a", "b")
        assert await _snapshot(store, ["t", "other"], ["a", "b", "elsewhere"]) == before

    async def test_one_bad_resolution_rolls_back_the_whole_append(self, store: Store) -> None:
        (first,) = await _grow(store, "t", 1, interrupts=["a", "b", "done"])
        second = _checkpoint("t", 2)
        await store.append_checkpoint(
            second, expected_head=first.id, resolutions=[_resolve("done", "cancelled")]
        )
        ids = ["a", "b", "done", "c"]
        before = await _snapshot(store, ["t"], ids)
        third = _checkpoint("t", 3)
        attempts: list[tuple[type[Exception], list[Resolution]]] = [
            (UnknownInterrupt, [_resolve("a"), _resolve("ghost")]),
            (InterruptAlreadyResolved, [_resolve("a"), _resolve("done")]),
            (InterruptAlreadyResolved, [_resolve("b"), _resolve("a"), _resolve("b")]),
        ]
        for error, resolutions in attempts:
            with pytest.raises(error):
                await store.append_checkpoint(
                    third,
                    expected_head=second.id,
                    new_interrupts=[_interrupt("c", third)],
                    resolutions=resolutions,
                )
            assert await _snapshot(store, ["t"], ids) == before
        assert await store.get_checkpoint("t", third.id) is None

    async def test_head_is_checked_before_resolutions(self, store: Store) -> None:
        first, _ = await _grow(store, "t", 2, interrupts=["a"])
        with pytest.raises(ThreadBusy):
            await store.append_checkpoint(
                _checkpoint("t", 3), expected_head=first.id, resolutions=[_resolve("ghost")]
            )

    async def test_contradictory_arguments_are_refused(self, store: Store) -> None:
        (first,) = await _grow(store, "t", 1, interrupts=["a"])
        second = _checkpoint("t", 2)
        before = await _snapshot(store, ["t"], ["a", "x"])
        with pytest.raises(ValueError, match="pending"):
            await store.append_checkpoint(
                second, expected_head=first.id, resolutions=[_resolve("a", "pending")]
            )
        with pytest.raises(ValueError, match="belong"):
            await store.append_checkpoint(
                second, expected_head=first.id, new_interrupts=[_interrupt("x", first)]
            )
        assert await _snapshot(store, ["t"], ["a", "x"]) == before

    async def test_an_append_that_cannot_be_stored_leaves_nothing(self, store: Store) -> None:
        (first,) = await _grow(store, "t", 1, interrupts=["a"])
        before = await _snapshot(store, ["t"], ["a", "b"])
        bad = _checkpoint("bad\ud800", 1, body=b"body")
        with pytest.raises(ValueError, match=r"record\.thread"):
            await store.append_checkpoint(
                bad,
                expected_head=None,
                new_interrupts=[_interrupt("b", bad)],
                audit=[_entry("interrupt", 1)],
            )
        # An audit entry that cannot be hashed fails the append after every check passed.
        second = _checkpoint("t", 2)
        with pytest.raises((TypeError, ValueError, StoreError)):
            await store.append_checkpoint(
                second,
                expected_head=first.id,
                new_interrupts=[_interrupt("b", second)],
                resolutions=[_resolve("a")],
                audit=[AuditEntry(kind="edit", actor=None, data=object())],  # type: ignore[arg-type]
            )
        assert await _snapshot(store, ["t"], ["a", "b"]) == before
        assert await store.audit_log() == []

    async def test_arguments_no_backend_can_store_are_refused_by_name(self, store: Store) -> None:
        await _grow(store, "t", 1, interrupts=["a"])
        lone = "t\udc80"
        with pytest.raises(ValueError, match="thread"):
            await store.get_checkpoint(lone)
        with pytest.raises(ValueError, match="thread"):
            await store.get_thread(lone)
        with pytest.raises(ValueError, match="key"):
            await store.pending(key=lone)
        with pytest.raises(ValueError, match="after"):
            await store.pending(after=lone)
        with pytest.raises(ValueError, match="thread"):
            await store.audit_log(thread=lone)
        with pytest.raises(TypeError, match="thread"):
            await store.get_checkpoint(None)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="thread"):
            await store.append_checkpoint(_checkpoint(None, 1), expected_head=None)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="thread"):
            await store.request_pause(7)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="audit actor"):
            await store.begin_effect(
                "t",
                "k",
                name="pay",
                fence=None,
                audit=[AuditEntry(kind="effect_started", actor=lone, data=b"{}")],
            )
        assert await store.get_effect("t", "k") is None
        assert len(await store.pending()) == 1

    async def test_reused_ids_are_refused(self, store: Store) -> None:
        (taken,) = await _grow(store, "a", 1, interrupts=["i"])
        (first,) = await _grow(store, "t", 1)
        before = await _snapshot(store, ["a", "t"], ["i", "j"])
        reused = _checkpoint("t", 2, id=taken.id)
        with pytest.raises(StoreError):
            await store.append_checkpoint(reused, expected_head=first.id)
        second = _checkpoint("t", 2)
        for new in (["i"], ["j", "j"]):
            with pytest.raises(StoreError):
                await store.append_checkpoint(
                    second,
                    expected_head=first.id,
                    new_interrupts=[_interrupt(i, second) for i in new],
                )
        assert await _snapshot(store, ["a", "t"], ["i", "j"]) == before

    # The inbox

    async def test_pending_is_oldest_first_and_filters(self, store: Store) -> None:
        a1 = _checkpoint("a", 1)
        b1 = _checkpoint("b", 1)
        await store.append_checkpoint(
            a1,
            expected_head=None,
            new_interrupts=[
                _interrupt("a-late", a1, key="k", created_at=_T0 + 50),
                _interrupt("a-early", a1, created_at=_T0 + 10),
            ],
        )
        await store.append_checkpoint(
            b1,
            expected_head=None,
            new_interrupts=[
                _interrupt("b-first", b1, key="k", created_at=_T0 + 5),
                _interrupt("b-mid", b1, key="other", created_at=_T0 + 30),
            ],
        )

        async def ids(
            thread: str | None = None, key: str | None = None, limit: int = 100
        ) -> list[str]:
            return [i.id for i in await store.pending(thread=thread, key=key, limit=limit)]

        assert await ids() == ["b-first", "a-early", "b-mid", "a-late"]
        assert await ids(limit=2) == ["b-first", "a-early"]
        assert await ids(limit=0) == []
        assert await ids(thread="a") == ["a-early", "a-late"]
        assert await ids(thread="a", limit=1) == ["a-early"]
        assert await ids(key="k") == ["b-first", "a-late"]
        assert await ids(key="k", limit=1) == ["b-first"]
        assert await ids(thread="a", key="k") == ["a-late"]
        assert await ids(thread="b", key="nope") == []
        assert await ids(thread="nope") == []
        assert await store.pending(thread="a", key="k") == [
            _interrupt("a-late", a1, key="k", created_at=_T0 + 50)
        ]

    async def test_pending_ties_keep_append_order(self, store: Store) -> None:
        order = ["m", "c", "x", "a", "q"]
        await _grow(store, "t", 1, interrupts=order[:3])
        await _grow(store, "u", 1, interrupts=order[3:])  # same created_at as thread t's
        assert [i.id for i in await store.pending()] == order

    async def test_resolved_interrupts_leave_the_inbox(self, store: Store) -> None:
        (first,) = await _grow(store, "t", 1, interrupts=["a", "b", "c"])
        second = _checkpoint("t", 2)
        await store.append_checkpoint(
            second,
            expected_head=first.id,
            resolutions=[_resolve("a"), _resolve("c", "expired", None)],
        )
        assert [i.id for i in await store.pending()] == ["b"]
        assert [i.id for i in await store.pending(thread="t")] == ["b"]
        await store.append_checkpoint(
            _checkpoint("t", 3), expected_head=second.id, resolutions=[_resolve("b", "cancelled")]
        )
        assert await store.pending() == []
        assert await store.pending(thread="t") == []

    # Deleting

    async def test_delete_thread_removes_everything_of_it(self, store: Store) -> None:
        first, second, third = await _grow(store, "t", 3, interrupts=["a", "b"])
        await store.append_checkpoint(
            _checkpoint("t", 4), expected_head=third.id, resolutions=[_resolve("a")]
        )
        kept = await _grow(store, "u", 2, interrupts=["u-i"])
        await store.delete_thread("t")
        assert await store.get_thread("t") is None
        assert await store.checkpoint_range("t", lo=1, hi=9) == []
        assert await store.get_interrupt("a") is None
        assert await store.get_interrupt("b") is None
        assert await store.get_checkpoint("t", second.id) is None
        assert await store.list_checkpoints("t") == []
        assert await store.pending(thread="t") == []
        assert await store.checkpoint_range("u", lo=1, hi=9) == kept
        assert [i.id for i in await store.pending()] == ["u-i"]
        await store.delete_thread("t")
        await store.delete_thread("never")
        # The thread and its ids are free again.
        assert await _grow(store, "t", 1, interrupts=["a"]) == [first]

    # Closing

    async def test_close_is_idempotent_and_later_calls_raise(self, store: Store) -> None:
        (first,) = await _grow(store, "t", 1)
        await store.close()
        await store.close()
        with pytest.raises(StoreClosed):
            await store.append_checkpoint(_checkpoint("t", 2), expected_head=first.id)
        with pytest.raises(StoreClosed):
            await store.get_checkpoint("t")
        with pytest.raises(StoreClosed):
            await store.get_checkpoint("t", first.id)
        with pytest.raises(StoreClosed):
            await store.checkpoint_range("t", lo=1, hi=1)
        with pytest.raises(StoreClosed):
            await store.list_checkpoints("t")
        with pytest.raises(StoreClosed):
            await store.get_thread("t")
        with pytest.raises(StoreClosed):
            await store.get_interrupt("i")
        with pytest.raises(StoreClosed):
            await store.pending()
        with pytest.raises(StoreClosed):
            await store.delete_thread("t")

    # Concurrency

    async def test_exactly_one_writer_wins_per_head(self, store: Store) -> None:
        (first,) = await _grow(store, "t", 1)
        go = anyio.Event()
        won: list[str] = []
        lost: list[str] = []

        async def writer(name: str) -> None:
            await go.wait()
            record = _checkpoint("t", 2, id=name, parent_id=first.id)
            try:
                await store.append_checkpoint(record, expected_head=first.id)
            except ThreadBusy:
                lost.append(name)
            else:
                won.append(name)

        async with anyio.create_task_group() as tg:
            for n in range(20):
                tg.start_soon(writer, f"w{n}")
            go.set()
        assert len(won) == 1
        assert len(lost) == 19
        head = await store.get_thread("t")
        assert head is not None
        assert (head.head_id, head.head_seq) == (won[0], 2)

    async def test_concurrent_writers_build_one_unbroken_chain(self, store: Store) -> None:
        await _grow(store, "t", 1)
        wins: list[str] = []

        async def writer(name: str, count: int) -> None:
            for n in range(count):
                while True:
                    head = await store.get_thread("t")
                    assert head is not None
                    mine = f"{name}.{n}"
                    record = _checkpoint("t", head.head_seq + 1, id=mine, parent_id=head.head_id)
                    try:
                        await store.append_checkpoint(record, expected_head=head.head_id)
                    except ThreadBusy:
                        continue
                    wins.append(mine)
                    break

        async with anyio.create_task_group() as tg:
            for w in range(8):
                tg.start_soon(writer, f"w{w}", 10)
        chain = await store.checkpoint_range("t", lo=1, hi=_EVERYTHING)
        assert [c.seq for c in chain] == list(range(1, 82))
        assert all(c.parent_id == p.id for p, c in itertools.pairwise(chain))
        assert sorted(c.id for c in chain[1:]) == sorted(wins)

    async def test_cancelled_append_is_all_or_nothing(self, store: Store) -> None:
        (first,) = await _grow(store, "t", 1, interrupts=["a"])
        second = _checkpoint("t", 2)
        with anyio.CancelScope() as scope:
            scope.cancel()
            await store.append_checkpoint(
                second,
                expected_head=first.id,
                new_interrupts=[_interrupt("b", second)],
                resolutions=[_resolve("a")],
            )
        head = await store.get_thread("t")
        assert head is not None
        written = head.head_id == second.id
        assert (await store.get_checkpoint("t", second.id) is not None) == written
        assert (await store.get_interrupt("b") is not None) == written
        assert [i.id for i in await store.pending()] == (["b"] if written else ["a"])
        # Whatever happened, the store goes on from its real head.
        await _grow(store, "t", 1)

    async def test_pause_requests_are_taken_once(self, store: Store) -> None:
        assert not await store.request_pause("nobody")
        await _grow(store, "t", 1)
        assert await store.take_pause_request("t") is None
        assert await store.request_pause("t")
        assert await store.request_pause("t", forced=True)
        assert await store.request_pause("t")  # planned never downgrades forced
        assert await store.take_pause_request("t") == "forced"
        assert await store.take_pause_request("t") is None
        assert await store.request_pause("t")
        await store.delete_thread("t")
        assert await store.take_pause_request("t") is None

    async def test_expire_deletes_only_old_finished_threads(self, store: Store) -> None:
        old_done = _checkpoint("old-done", 1, status="done")
        old_waiting = _checkpoint("old-waiting", 1, status="interrupted")
        new_done = msgspec.structs.replace(
            _checkpoint("new-done", 1, status="done"), created_at=_T0 + 500
        )
        for record in (old_done, old_waiting, new_done):
            await store.append_checkpoint(record, expected_head=None)
        assert await store.expire(older_than=_T0 + 100, limit=0) == []
        assert await store.expire(older_than=_T0 + 100) == ["old-done"]
        assert await store.get_thread("old-done") is None
        assert await store.get_checkpoint("old-done") is None
        assert await store.get_thread("old-waiting") is not None
        assert await store.get_thread("new-done") is not None
        assert await store.expire(older_than=_T0 + 100) == []

    async def test_pending_pages_with_after_and_filters_by_deadline(self, store: Store) -> None:
        first = _checkpoint("a", 1)
        second = _checkpoint("b", 1)
        a_rows = [
            _interrupt(f"a{n}", first, created_at=_T0 + n % 3, deadline=_T0 + 50 + n)
            for n in range(5)
        ]
        b_rows = [_interrupt(f"b{n}", second, created_at=_T0 + 1, key="k") for n in range(3)]
        await store.append_checkpoint(first, expected_head=None, new_interrupts=a_rows)
        await store.append_checkpoint(second, expected_head=None, new_interrupts=b_rows)
        everything = [i.id for i in await store.pending(limit=100)]
        assert sorted(everything) == sorted(i.id for i in [*a_rows, *b_rows])
        paged: list[str] = []
        after = None
        while True:
            page = await store.pending(limit=3, after=after)
            if not page:
                break
            paged.extend(i.id for i in page)
            after = page[-1].id
        assert paged == everything  # same order, nothing lost or repeated
        by_thread = [i.id for i in await store.pending(thread="a", limit=2, after="a0")]
        assert by_thread == [i for i in everything if i.startswith("a")][1:3]
        soon = await store.pending(deadline_before=_T0 + 53)
        assert sorted(i.id for i in soon) == ["a0", "a1", "a2"]  # b* have no deadline
        assert [i.id for i in await store.pending(key="k", after="b0")] == ["b1", "b2"]

    async def test_pending_filters_by_tool_and_age(self, store: Store) -> None:
        first = _checkpoint("a", 1)
        rows = [
            msgspec.structs.replace(
                _interrupt(f"i{n}", first, created_at=_T0 + n), tool="mail" if n % 2 else "shell"
            )
            for n in range(6)
        ]
        await store.append_checkpoint(first, expected_head=None, new_interrupts=rows)
        assert [i.id for i in await store.pending(tool="mail")] == ["i1", "i3", "i5"]
        assert [i.id for i in await store.pending(tool="mail", after="i1")] == ["i3", "i5"]
        assert [i.id for i in await store.pending(older_than=_T0 + 2)] == ["i0", "i1"]
        assert [i.id for i in await store.pending(tool="shell", older_than=_T0 + 3)] == [
            "i0",
            "i2",
        ]
        assert (await store.get_interrupt("i1")) == rows[1]

    # Leases and fencing

    async def test_lease_is_acquired_held_and_released_by_writes(self, store: Store) -> None:
        one, two, three = (_checkpoint("t", n) for n in (1, 2, 3))
        token = await store.append_checkpoint(one, expected_head=None, fence=_fence("a", None))
        assert token == 1
        # Another executor is refused while the lease is live, and nothing is written.
        with pytest.raises(ThreadBusy) as busy:
            await store.append_checkpoint(two, expected_head=one.id, fence=_fence("b", None))
        assert busy.value.holder == "a" and not isinstance(busy.value, FencedOut)
        with pytest.raises(ThreadBusy):
            await store.append_checkpoint(two, expected_head=one.id)  # no fence: still refused
        assert (await store.get_thread("t")).head_id == one.id  # type: ignore[union-attr]
        assert await store.append_checkpoint(two, expected_head=one.id, fence=_fence("a", 1)) == 1
        await store.append_checkpoint(
            three, expected_head=two.id, fence=_fence("a", 1, release=True)
        )
        # Released: the next executor acquires it with a higher token.
        four = _checkpoint("t", 4)
        assert (
            await store.append_checkpoint(four, expected_head=three.id, fence=_fence("b", None))
            == 2
        )

    async def test_stale_executor_is_fenced_out(self, store: Store) -> None:
        one, two, three = (_checkpoint("t", n) for n in (1, 2, 3))
        await store.append_checkpoint(one, expected_head=None, fence=_fence("a", None, ttl=0.05))
        await anyio.sleep(0.1)  # a's lease expires while it stalls
        assert (
            await store.append_checkpoint(two, expected_head=one.id, fence=_fence("b", None)) == 2
        )
        with pytest.raises(FencedOut) as fenced:
            await store.append_checkpoint(three, expected_head=two.id, fence=_fence("a", 1))
        assert (fenced.value.token, fenced.value.current) == (1, 2)
        with pytest.raises(FencedOut):
            await store.renew_lease("t", _fence("a", 1))
        with pytest.raises(FencedOut):
            await store.begin_effect("t", "k", name="x", fence=_fence("a", 1))
        assert await store.get_effect("t", "k") is None
        assert (await store.get_thread("t")).head_id == two.id  # type: ignore[union-attr]
        await store.renew_lease("t", _fence("b", 2, release=True))
        # b released it: a write without a lease goes through again.
        await store.append_checkpoint(three, expected_head=two.id)

    async def test_renewing_needs_a_held_token(self, store: Store) -> None:
        one = _checkpoint("t", 1)
        token = await store.append_checkpoint(one, expected_head=None, fence=_fence("a", None))
        with pytest.raises(ValueError, match="fencing token of a held lease"):
            await store.renew_lease("t", _fence("a", None))
        # Refused before touching the lease: another executor is still kept out.
        with pytest.raises(ThreadBusy):
            await store.append_checkpoint(
                _checkpoint("t", 2), expected_head=one.id, fence=_fence("b", None)
            )
        await store.renew_lease("t", _fence("a", token, release=True))

    async def test_an_expired_lease_nobody_took_still_holds(self, store: Store) -> None:
        one, two = _checkpoint("t", 1), _checkpoint("t", 2)
        await store.append_checkpoint(one, expected_head=None, fence=_fence("a", None, ttl=0.01))
        await anyio.sleep(0.05)
        assert await store.append_checkpoint(two, expected_head=one.id, fence=_fence("a", 1)) == 1

    # Effects

    async def test_effect_starts_once_then_finishes(self, store: Store) -> None:
        one = _checkpoint("t", 1)
        token = await store.append_checkpoint(one, expected_head=None, fence=_fence("a", None))
        fence = _fence("a", token)
        started, record = await store.begin_effect("t", "k1", name="send", fence=fence)
        assert started and record.status == "started" and record.attempt == 1
        again, found = await store.begin_effect("t", "k1", name="send", fence=fence)
        assert not again and found == record
        await store.finish_effect("t", "k1", result=b"sent", fence=fence)
        done = await store.get_effect("t", "k1")
        assert done is not None and done.status == "done" and done.result == b"sent"
        assert done.finished_at is not None
        # A done effect is never started again, not even when a retry is asked for.
        again, found = await store.begin_effect("t", "k1", name="send", fence=fence, retry=True)
        assert not again and found == done
        await store.finish_effect("t", "k1", result=b"sent", fence=fence)  # a retry: no-op
        with pytest.raises(StoreError):
            await store.finish_effect("t", "k1", result=b"twice", fence=fence)
        with pytest.raises(StoreError):
            await store.finish_effect("t", "nope", result=None, fence=fence)

    async def test_started_effect_is_retried_only_on_request(self, store: Store) -> None:
        started, _ = await store.begin_effect("new", "k", name="charge", fence=None)
        assert started
        again, found = await store.begin_effect("new", "k", name="charge", fence=None)
        assert not again and found.status == "started"
        retried, record = await store.begin_effect(
            "new", "k", name="charge", fence=None, retry=True
        )
        assert retried and record.attempt == 2 and record.status == "started"

    async def test_concurrent_starts_of_one_effect_have_one_winner(self, store: Store) -> None:
        wins: list[bool] = []

        async def start() -> None:
            started, _ = await store.begin_effect("t", "k", name="x", fence=None)
            wins.append(started)

        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(start)
        assert sorted(wins) == [False] * 7 + [True]

    # Audit

    async def test_audit_entries_chain_per_thread(self, store: Store) -> None:
        one = _checkpoint("a", 1, status="interrupted")
        await store.append_checkpoint(
            one,
            expected_head=None,
            new_interrupts=[_interrupt("a-i", one)],
            audit=[_entry("interrupt", 1)],
        )
        two = _checkpoint("a", 2)
        await store.append_checkpoint(
            two,
            expected_head=one.id,
            resolutions=[_resolve("a-i")],
            audit=[_entry("decision", 2), _entry("edit", 3)],
        )
        await store.begin_effect("a", "k", name="x", fence=None, audit=[_entry("effect", 4)])
        await store.append_checkpoint(
            _checkpoint("b", 1), expected_head=None, audit=[_entry("interrupt", 5)]
        )
        log = await store.audit_log()
        assert [(r.thread, r.seq, r.kind) for r in log] == [
            ("a", 1, "interrupt"),
            ("a", 2, "decision"),
            ("a", 3, "edit"),
            ("a", 4, "effect"),
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
        one = _checkpoint("t", 1)
        await store.append_checkpoint(one, expected_head=None, fence=_fence("a", None))
        with pytest.raises(ThreadBusy):
            await store.append_checkpoint(
                _checkpoint("t", 2), expected_head=one.id, audit=[_entry("decision", 1)]
            )
        with pytest.raises(UnknownInterrupt):
            await store.append_checkpoint(
                _checkpoint("t", 2),
                expected_head=one.id,
                fence=_fence("a", 1),
                resolutions=[_resolve("nope")],
                audit=[_entry("decision", 1)],
            )
        assert await store.audit_log() == []

    async def test_deleting_a_thread_keeps_and_closes_its_audit_log(self, store: Store) -> None:
        await store.append_checkpoint(
            _checkpoint("t", 1), expected_head=None, audit=[_entry("interrupt", 1)]
        )
        await store.begin_effect("t", "k", name="x", fence=None)
        await store.delete_thread("t")
        assert await store.get_effect("t", "k") is None
        assert [r.kind for r in await store.audit_log(thread="t")] == [
            "interrupt",
            "thread_deleted",
        ]
        assert (await verify_audit(store)).ok
