"""The change feed: every committed change once, in order (`FeedConformance`)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Final

import anyio
import anyio.lowlevel
import msgspec
import pytest

from ..._errors import (
    FencedOut,
    InterruptAlreadyResolved,
    StoreClosed,
    StoreError,
    ThreadBusy,
    UnknownInterrupt,
)
from ...stores._base import (
    ChangeRecord,
    CheckpointRecord,
    CheckpointStatus,
    InterruptRecord,
    Resolution,
    Store,
)
from ._common import (
    T0,
    ConformanceGroup,
    make_checkpoint,
    make_fence,
    make_interrupt,
    resolve,
)

__all__ = ["FeedConformance", "Seen", "follow", "seen"]

_ENDS: Final = {"done": "run_finished", "failed": "run_failed"}

Seen = tuple[str, str, str, str | None]
"""A change as a test compares it: ``(kind, thread, checkpoint_id, interrupt_id)``."""


def seen(changes: Sequence[ChangeRecord]) -> list[Seen]:
    """The changes without their cursors and times."""
    return [(c.kind, c.thread, c.checkpoint_id, c.interrupt_id) for c in changes]


async def follow(store: Store, after: str | None = None, *, page: int = 3) -> list[ChangeRecord]:
    """Every change after ``after``, read ``page`` at a time, as a follower pages on."""
    out: list[ChangeRecord] = []
    while True:
        got = await store.changes(after=after, limit=page)
        out += got
        if len(got) < page:
            return out
        after = got[-1].cursor


async def commit(
    store: Store,
    record: CheckpointRecord,
    expected_head: str | None,
    *,
    new: Sequence[InterruptRecord] = (),
    resolutions: Sequence[Resolution] = (),
) -> list[Seen]:
    """Append ``record``; return the changes the feed must then list for it, in order."""
    await store.append_checkpoint(
        record, expected_head=expected_head, new_interrupts=new, resolutions=resolutions
    )
    out: list[Seen] = [
        (f"interrupt_{r.status}", record.thread, record.id, r.id) for r in resolutions
    ]
    out += [("interrupt_created", record.thread, record.id, i.id) for i in new]
    if record.status in _ENDS:
        out.append((_ENDS[record.status], record.thread, record.id, None))
    return out


class FeedConformance(ConformanceGroup):
    """The change feed: every committed change once, each thread's in commit order.

    Each append writes, with itself, one change per new interrupt, one per resolution (its
    kind named for the status it gives) and one for a checkpoint of status ``done`` or
    ``failed``; a step of a run writes none, nor does a refused append. A follower that pages
    on with the last change's cursor sees every change exactly once, each thread's in commit
    order, also while writers commit concurrently; `Store.change_cursor` is where the changes
    still to come begin. Cursors of no store are refused, `Store.prune_changes` removes the
    oldest changes and keeps an unbroken tail, no position is ever used twice, and deleting
    threads leaves the feed as it was.
    """

    async def test_appends_write_the_changes_they_make(self, store: Store) -> None:
        one = make_checkpoint("t", 1, status="interrupted")
        two = make_checkpoint("t", 2, status="interrupted")
        three = make_checkpoint("t", 3)
        four = make_checkpoint("t", 4, status="done")
        failed = make_checkpoint("u", 1, status="failed")
        expected = await commit(
            store, one, None, new=[make_interrupt("a", one), make_interrupt("b", one)]
        )
        expected += await commit(
            store,
            two,
            one.id,
            new=[make_interrupt("c", two)],
            resolutions=[resolve("b", "expired"), resolve("a")],
        )
        assert await commit(store, three, two.id) == []  # a step of a run: no change
        expected += await commit(store, four, three.id, resolutions=[resolve("c", "cancelled")])
        expected += await commit(store, failed, None)
        changes = await store.changes()
        assert (
            seen(changes)
            == expected
            == [
                ("interrupt_created", "t", one.id, "a"),
                ("interrupt_created", "t", one.id, "b"),
                ("interrupt_expired", "t", two.id, "b"),
                ("interrupt_resolved", "t", two.id, "a"),
                ("interrupt_created", "t", two.id, "c"),
                ("interrupt_cancelled", "t", four.id, "c"),
                ("run_finished", "t", four.id, None),
                ("run_failed", "u", failed.id, None),
            ]
        )
        created = {r.id: r.created_at for r in (one, two, three, four, failed)}
        assert [c.at for c in changes] == [created[c.checkpoint_id] for c in changes]
        assert len({c.cursor for c in changes}) == len(changes)

    async def test_a_follower_sees_every_change_once_in_order(self, store: Store) -> None:
        expected: list[Seen] = []
        for thread in ("t", "u", "v"):
            head: str | None = None
            for seq in range(1, 5):
                status: CheckpointStatus = "done" if seq == 4 else "interrupted"
                record = make_checkpoint(thread, seq, status=status)
                new = [] if seq == 4 else [make_interrupt(f"{thread}{seq}", record)]
                earlier = [resolve(f"{thread}{seq - 1}")] if seq > 1 else []
                expected += await commit(store, record, head, new=new, resolutions=earlier)
                head = record.id
        everything = await store.changes()
        assert seen(everything) == expected and len(expected) == 21
        # Paged on with each page's last cursor: the same changes, none twice.
        for page in (1, 2, 5, 21, 22):
            assert await follow(store, page=page) == everything
        # Each cursor names the place just after its change.
        for n, change in enumerate(everything):
            assert await store.changes(after=change.cursor) == everything[n + 1 :]
            assert await store.changes(after=change.cursor, limit=2) == everything[n + 1 : n + 3]
        assert await store.changes(after=everything[-1].cursor) == []
        assert await store.changes(limit=0) == []

    async def test_a_refused_append_writes_no_change(self, store: Store) -> None:
        one = make_checkpoint("t", 1, status="interrupted")
        await store.append_checkpoint(
            one,
            expected_head=None,
            new_interrupts=[make_interrupt("a", one)],
            fence=make_fence("owner", None),
        )
        two = make_checkpoint("t", 2, status="done")
        before = await store.changes()
        new = [make_interrupt("n", two)]
        with pytest.raises(ThreadBusy):  # the lease is another's
            await store.append_checkpoint(two, expected_head=one.id, new_interrupts=new)
        with pytest.raises(FencedOut):
            await store.append_checkpoint(
                two, expected_head=one.id, new_interrupts=new, fence=make_fence("owner", 7)
            )
        fence = make_fence("owner", 1)
        with pytest.raises(ThreadBusy):  # not the head
            await store.append_checkpoint(
                two, expected_head="t.9999", new_interrupts=new, fence=fence
            )
        with pytest.raises(UnknownInterrupt):
            await store.append_checkpoint(
                two,
                expected_head=one.id,
                new_interrupts=new,
                resolutions=[resolve("a"), resolve("nope")],
                fence=fence,
            )
        with pytest.raises(ValueError, match="pending"):
            await store.append_checkpoint(
                two, expected_head=one.id, resolutions=[resolve("a", "pending")], fence=fence
            )
        with pytest.raises(StoreError):  # the new interrupt's id is taken
            await store.append_checkpoint(
                two,
                expected_head=one.id,
                new_interrupts=[make_interrupt("a", two)],
                resolutions=[resolve("a")],
                fence=fence,
            )
        taken = make_checkpoint("u", 1, id=one.id, status="done")
        with pytest.raises(StoreError):  # the checkpoint's id is taken
            await store.append_checkpoint(taken, expected_head=None)
        assert await store.changes() == before
        await store.append_checkpoint(
            two, expected_head=one.id, resolutions=[resolve("a")], fence=fence
        )
        three = make_checkpoint("t", 3)
        with pytest.raises(InterruptAlreadyResolved):
            await store.append_checkpoint(
                three,
                expected_head=two.id,
                resolutions=[resolve("a", "cancelled")],
                fence=fence,
            )
        assert seen(await store.changes(after=before[-1].cursor)) == [
            ("interrupt_resolved", "t", two.id, "a"),
            ("run_finished", "t", two.id, None),
        ]

    async def test_change_cursor_yields_only_later_changes(self, store: Store) -> None:
        start = await store.change_cursor()
        assert await store.changes(after=start) == []
        one = make_checkpoint("t", 1, status="interrupted")
        first = await commit(store, one, None, new=[make_interrupt("a", one)])
        assert seen(await store.changes(after=start)) == first
        now = await store.change_cursor()
        assert await store.changes(after=now) == []
        assert await store.change_cursor() == now  # nothing happened since
        two = make_checkpoint("t", 2, status="done")
        later = await commit(store, two, one.id, resolutions=[resolve("a")])
        assert seen(await store.changes(after=now)) == later
        assert seen(await store.changes(after=start)) == first + later
        assert seen(await store.changes()) == first + later
        # A step of a run moves no cursor.
        last = await store.change_cursor()
        await store.append_checkpoint(make_checkpoint("t", 3), expected_head=two.id)
        assert await store.changes(after=last) == []

    async def test_cursors_and_limits_of_no_store_are_refused(self, store: Store) -> None:
        one = make_checkpoint("t", 1, status="done")
        await store.append_checkpoint(one, expected_head=None)
        (change,) = await store.changes()
        for kind in (5, 1.0, b"1", ["1"]):
            with pytest.raises(TypeError, match="cursor"):
                await store.changes(after=kind)  # type: ignore[arg-type]
        # Malformed (or, in a form the store does use, ahead of everything it ever wrote).
        bad = ["", "not a cursor", " 1", "1 ", "-1", "1.5", "\u0661", "1\n", "9" * 40]
        bad += ["123456789", "123456789012-1", f"{change.cursor}x", f"x{change.cursor}"]
        for wrong in bad:
            with pytest.raises(ValueError, match="cursor"):
                await store.changes(after=wrong)
        for limit in ("10", True, None):
            with pytest.raises(TypeError, match="limit"):
                await store.changes(limit=limit)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="limit"):
            await store.changes(limit=-1)
        # Its own cursors still work.
        assert await store.changes(after=change.cursor) == []
        assert await store.changes() == [change]

    async def test_prune_changes_removes_old_changes_only(self, store: Store) -> None:
        one = make_checkpoint("t", 1, status="interrupted")
        two = make_checkpoint("t", 2, status="interrupted")
        three = make_checkpoint("t", 3, status="done")
        await commit(store, one, None, new=[make_interrupt("a", one)])
        await commit(store, two, one.id, new=[make_interrupt("b", two)], resolutions=[resolve("a")])
        latest = await commit(store, three, two.id, resolutions=[resolve("b")])
        everything = await store.changes()
        assert await store.prune_changes(older_than=one.created_at) == 0
        assert await store.prune_changes(older_than=two.created_at) == 1  # one's change
        assert await store.prune_changes(older_than=three.created_at, limit=1) == 1
        assert await store.prune_changes(older_than=three.created_at, limit=0) == 0
        assert await store.prune_changes(older_than=three.created_at) == 1
        assert await store.prune_changes(older_than=three.created_at) == 0
        kept = await store.changes()
        assert seen(kept) == latest and kept == everything[3:]
        # A follower whose cursor names a pruned change goes on after it.
        assert await store.changes(after=everything[0].cursor) == kept
        for older_than in (None, "soon"):
            with pytest.raises(TypeError, match="older_than"):
                await store.prune_changes(older_than=older_than)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="older_than"):
            await store.prune_changes(older_than=math.nan)
        with pytest.raises(ValueError, match="limit"):
            await store.prune_changes(older_than=T0, limit=-1)
        with pytest.raises(TypeError, match="limit"):
            await store.prune_changes(older_than=T0, limit="1")  # type: ignore[arg-type]
        assert await store.changes() == kept

    async def test_prune_keeps_an_unbroken_tail_of_the_feed(self, store: Store) -> None:
        # Writers whose clocks disagree: a change stamped earlier is committed later.
        times = [T0 + 1, T0 + 2, T0 + 100, T0 + 3, T0 + 4]
        for n, at in enumerate(times):
            record = make_checkpoint(f"t{n}", 1, status="done")
            await store.append_checkpoint(
                msgspec.structs.replace(record, created_at=at), expected_head=None
            )
        everything = await store.changes()
        assert [c.at for c in everything] == times
        # The two before the late-stamped one go; the two after it wait for it.
        assert await store.prune_changes(older_than=T0 + 50) == 2
        assert await store.changes() == everything[2:]
        assert await store.prune_changes(older_than=T0 + 50) == 0
        assert await store.prune_changes(older_than=T0 + 101) == 3
        assert await store.changes() == []

    async def test_no_position_is_used_twice(self, store: Store) -> None:
        one = make_checkpoint("t", 1, status="done")
        await store.append_checkpoint(one, expected_head=None)
        (first,) = await store.changes()
        assert await store.prune_changes(older_than=math.inf) == 1
        assert await store.changes() == []
        assert await store.changes(after=first.cursor) == []
        # After the newest change was pruned, a new one still comes after its cursor.
        two = make_checkpoint("t", 2, status="failed")
        later = await commit(store, two, one.id)
        assert seen(await store.changes(after=first.cursor)) == later
        assert seen(await store.changes()) == later
        (second,) = await store.changes()
        assert second.cursor != first.cursor

    async def test_deleting_threads_leaves_the_feed_as_it_was(self, store: Store) -> None:
        one = make_checkpoint("t", 1, status="interrupted")
        expected = await commit(store, one, None, new=[make_interrupt("a", one)])
        old = msgspec.structs.replace(make_checkpoint("u", 1, status="done"), created_at=T0 - 50)
        expected += await commit(store, old, None)
        cursor = await store.change_cursor()
        await store.delete_thread("t")
        assert await store.expire(older_than=T0) == ["u"]
        assert seen(await store.changes()) == expected
        assert await store.changes(after=cursor) == []
        # The deleted thread starts again, its ids free: its new changes come after the old.
        again = make_checkpoint("t", 1, status="interrupted")
        later = await commit(store, again, None, new=[make_interrupt("a", again)])
        assert seen(await store.changes(after=cursor)) == later
        assert seen(await store.changes()) == expected + later

    async def test_concurrent_writers_reach_a_follower_once_each(self, store: Store) -> None:
        writers, rounds = 6, 5
        committed: dict[str, list[Seen]] = {}
        got: list[ChangeRecord] = []

        async def writer(thread: str) -> None:
            mine = committed.setdefault(thread, [])
            head: str | None = None
            for seq in range(1, rounds + 1):
                status: CheckpointStatus = "done" if seq == rounds else "interrupted"
                record = make_checkpoint(thread, seq, status=status)
                new = [] if seq == rounds else [make_interrupt(f"{thread}.i{seq}", record)]
                earlier = [resolve(f"{thread}.i{seq - 1}")] if seq > 1 else []
                mine += await commit(store, record, head, new=new, resolutions=earlier)
                head = record.id

        async def follower() -> None:
            after: str | None = None
            total = writers * (2 * rounds - 1)
            while len(got) < total:
                page = await store.changes(after=after, limit=4)
                got.extend(page)
                if page:
                    after = page[-1].cursor
                else:
                    await anyio.lowlevel.checkpoint()  # let the writers go on

        with anyio.fail_after(60):  # a lost change would keep the follower waiting for it
            async with anyio.create_task_group() as tg:
                tg.start_soon(follower)
                for w in range(writers):
                    tg.start_soon(writer, f"w{w}")
        assert len({c.cursor for c in got}) == len(got)
        assert Counter(seen(got)) == Counter(s for changes in committed.values() for s in changes)
        for thread, changes in committed.items():
            assert [s for s in seen(got) if s[1] == thread] == changes
        assert await store.changes(after=got[-1].cursor) == []
        assert await follow(store) == got

    async def test_a_closed_store_refuses_the_feed(self, store: Store) -> None:
        await store.append_checkpoint(make_checkpoint("t", 1, status="done"), expected_head=None)
        cursor = await store.change_cursor()
        await store.close()
        with pytest.raises(StoreClosed):
            await store.changes()
        with pytest.raises(StoreClosed):
            await store.changes(after=cursor)
        with pytest.raises(StoreClosed):
            await store.change_cursor()
        with pytest.raises(StoreClosed):
            await store.prune_changes(older_than=T0)
