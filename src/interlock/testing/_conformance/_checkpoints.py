"""`CheckpointConformance`: appending, reading back, and compare-and-set on the head."""

from __future__ import annotations

import msgspec
import pytest

from ..._errors import (
    StoreError,
    ThreadBusy,
)
from ...stores._base import (
    CheckpointRecord,
    Store,
    ThreadRecord,
)
from ._common import (
    T0,
    ConformanceGroup,
    grow,
    make_checkpoint,
    make_interrupt,
    resolve,
    snapshot,
)

__all__ = ["CheckpointConformance"]


class CheckpointConformance(ConformanceGroup):
    """Checkpoints and heads: appending, reading back, compare-and-set on the head.

    A backend keeps checkpoints in per-thread append order and moves the head only by
    compare-and-set. What was appended reads back exactly (as the head, by id, by range, and
    newest first page by page), a checkpoint of another thread is never returned, and an
    append whose ``expected_head`` or ``seq`` does not fit the head, or that reuses an id, is
    refused with nothing written.
    """

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

    async def test_threads_are_listed_by_id_and_status_page_by_page(self, store: Store) -> None:
        assert await store.threads() == []
        for thread in ("c", "a", "d", "b"):
            await grow(store, thread, 1)
        for thread in ("b", "d"):  # now failed: their latest checkpoint says so
            await store.append_checkpoint(
                make_checkpoint(thread, 2, status="failed"), expected_head=f"{thread}.0001"
            )
        heads = {t: await store.get_thread(t) for t in "abcd"}
        assert await store.threads() == [heads[t] for t in "abcd"]
        assert await store.threads(limit=2) == [heads["a"], heads["b"]]
        assert await store.threads(after="b", limit=1) == [heads["c"]]
        assert await store.threads(status="failed") == [heads["b"], heads["d"]]
        assert await store.threads(status="failed", after="b") == [heads["d"]]
        assert await store.threads(status="ready") == [heads["a"], heads["c"]]
        assert await store.threads(status="done") == []
        assert await store.threads(limit=0) == []
        with pytest.raises(ValueError, match="status must be one of"):
            await store.threads(status="stranded")  # type: ignore[arg-type]

    async def test_append_then_read_head_thread_and_by_id(self, store: Store) -> None:
        first, second, third = await grow(store, "t", 3)
        assert await store.get_checkpoint("t") == third
        assert await store.get_checkpoint("t", first.id) == first
        assert await store.get_checkpoint("t", second.id) == second
        assert await store.get_thread("t") == ThreadRecord(
            thread="t", head_id=third.id, head_seq=3, status="ready", updated_at=third.created_at
        )

    async def test_checkpoint_of_another_thread_is_absent(self, store: Store) -> None:
        (a,) = await grow(store, "a", 1)
        await grow(store, "b", 1)
        assert await store.get_checkpoint("b", a.id) is None
        assert await store.get_checkpoint("a", "no-such-id") is None

    async def test_unusual_values_round_trip(self, store: Store) -> None:
        thread = "thread/ünïcode ✓ 'quoted'"
        first = make_checkpoint(thread, 1, id="id ✓ 1", body=b"")
        second = make_checkpoint(
            thread, 2, id="id ✓ 2", parent_id=first.id, status="failed", body=bytes(range(256)) * 4
        )
        big = make_checkpoint(thread, 3, id="id ✓ 3", parent_id=second.id, body=b"\0x" * 500_000)
        raised = make_interrupt("i ✓", second, key="ключ", deadline=T0 + 0.125)
        plain = make_interrupt("plain", second)
        await store.append_checkpoint(first, expected_head=None)
        await store.append_checkpoint(
            second, expected_head=first.id, new_interrupts=[raised, plain]
        )
        await store.append_checkpoint(
            big,
            expected_head=second.id,
            resolutions=[resolve(raised.id, value=b"\0\xff"), resolve(plain.id, value=None)],
        )
        assert await store.checkpoint_range(thread, lo=1, hi=3) == [first, second, big]
        resolved = await store.get_interrupt(raised.id)
        assert resolved == msgspec.structs.replace(
            raised, status="resolved", resolved_at=T0 + 10_000, resolution=b"\0\xff"
        )
        got_plain = await store.get_interrupt(plain.id)
        assert got_plain is not None
        assert got_plain.resolution is None
        assert got_plain.status == "resolved"

    async def test_checkpoint_range_bounds(self, store: Store) -> None:
        written = await grow(store, "t", 10)

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

    async def test_checkpoints_at_reads_the_seqs_asked(self, store: Store) -> None:
        written = await grow(store, "t", 10)
        await grow(store, "u", 3)

        async def seqs(asked: list[int] | tuple[int, ...]) -> list[int]:
            return [c.seq for c in await store.checkpoints_at("t", asked)]

        assert await store.checkpoints_at("t", [2, 7]) == [written[1], written[6]]
        assert await seqs([9, 1, 5]) == [1, 5, 9]  # ascending, whatever the order asked
        assert await seqs((4, 4, 4)) == [4]
        assert await seqs([0, -1, 11, 2**70, 3]) == [3]  # seqs the thread lacks: left out
        assert await seqs([]) == []
        assert [c.thread for c in await store.checkpoints_at("u", [1, 2, 3, 4])] == ["u"] * 3
        assert await store.checkpoints_at("other", [1]) == []
        for bad in ([1, "2"], [True], "12", {1: 2}, None, [1.0]):
            with pytest.raises(TypeError, match="seqs"):
                await store.checkpoints_at("t", bad)  # type: ignore[arg-type]

    async def test_list_checkpoints_pages_newest_first(self, store: Store) -> None:
        written = await grow(store, "t", 250)
        await grow(store, "other", 3)
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

    async def test_wrong_expected_head_changes_nothing(self, store: Store) -> None:
        first, _, third = await grow(store, "t", 3, interrupts=["i1"])
        before = await snapshot(store, ["t"], ["i1", "new"])
        stale = make_checkpoint("t", 4, id="stale", parent_id=first.id)
        with pytest.raises(ThreadBusy) as caught:
            await store.append_checkpoint(
                stale,
                expected_head=first.id,
                new_interrupts=[make_interrupt("new", stale)],
                resolutions=[resolve("i1")],
            )
        assert caught.value.thread == "t"
        assert await snapshot(store, ["t"], ["i1", "new"]) == before
        assert await store.get_checkpoint("t", "stale") is None
        assert (await store.get_checkpoint("t")) == third

    async def test_new_thread_that_exists_is_busy(self, store: Store) -> None:
        await grow(store, "t", 2)
        before = await snapshot(store, ["t"], [])
        with pytest.raises(ThreadBusy):
            await store.append_checkpoint(make_checkpoint("t", 1, id="again"), expected_head=None)
        with pytest.raises(ThreadBusy):
            await store.append_checkpoint(make_checkpoint("t", 3, id="again"), expected_head=None)
        assert await snapshot(store, ["t"], []) == before

    async def test_expected_head_of_missing_thread_is_busy(self, store: Store) -> None:
        with pytest.raises(ThreadBusy):
            await store.append_checkpoint(make_checkpoint("t", 1), expected_head="t.0000")
        assert await snapshot(store, ["t"], []) == ([None], [[]], [], [])

    async def test_wrong_seq_is_busy(self, store: Store) -> None:
        with pytest.raises(ThreadBusy):
            await store.append_checkpoint(make_checkpoint("new", 2), expected_head=None)
        assert await store.get_thread("new") is None
        _, second = await grow(store, "t", 2)
        before = await snapshot(store, ["t"], [])
        for seq in (1, 2, 4, 0):
            record = make_checkpoint("t", seq, id=f"bad{seq}", parent_id=second.id)
            with pytest.raises(ThreadBusy):
                await store.append_checkpoint(record, expected_head=second.id)
        assert await snapshot(store, ["t"], []) == before

    async def test_reused_ids_are_refused(self, store: Store) -> None:
        (taken,) = await grow(store, "a", 1, interrupts=["i"])
        (first,) = await grow(store, "t", 1)
        before = await snapshot(store, ["a", "t"], ["i", "j"])
        reused = make_checkpoint("t", 2, id=taken.id)
        with pytest.raises(StoreError):
            await store.append_checkpoint(reused, expected_head=first.id)
        second = make_checkpoint("t", 2)
        for new in (["i"], ["j", "j"]):
            with pytest.raises(StoreError):
                await store.append_checkpoint(
                    second,
                    expected_head=first.id,
                    new_interrupts=[make_interrupt(i, second) for i in new],
                )
        assert await snapshot(store, ["a", "t"], ["i", "j"]) == before
