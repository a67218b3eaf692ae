"""`DeletionConformance`: a thread goes with everything of it, and only it."""

from __future__ import annotations

import msgspec

from ...stores._base import (
    PendingFilter,
    Store,
)
from ._common import (
    T0,
    ConformanceGroup,
    grow,
    make_checkpoint,
    resolve,
)

__all__ = ["DeletionConformance"]


class DeletionConformance(ConformanceGroup):
    """Deletion and expiry: a thread goes with everything of it, and only it.

    Deleting a thread removes it and all of its checkpoints, interrupts and effects (and
    nothing of other threads), frees its ids, and is a no-op when repeated; `Store.expire`
    deletes only finished threads last written before the given time.
    """

    async def test_delete_thread_removes_everything_of_it(self, store: Store) -> None:
        first, second, third = await grow(store, "t", 3, interrupts=["a", "b"])
        await store.append_checkpoint(
            make_checkpoint("t", 4), expected_head=third.id, resolutions=[resolve("a")]
        )
        kept = await grow(store, "u", 2, interrupts=["u-i"])
        await store.delete_thread("t")
        assert await store.get_thread("t") is None
        assert await store.checkpoint_range("t", lo=1, hi=9) == []
        assert await store.get_interrupt("a") is None
        assert await store.get_interrupt("b") is None
        assert await store.get_checkpoint("t", second.id) is None
        assert await store.list_checkpoints("t") == []
        assert await store.pending(PendingFilter(thread="t")) == []
        assert await store.checkpoint_range("u", lo=1, hi=9) == kept
        assert [i.id for i in await store.pending()] == ["u-i"]
        await store.delete_thread("t")
        await store.delete_thread("never")
        # The thread and its ids are free again.
        assert await grow(store, "t", 1, interrupts=["a"]) == [first]

    async def test_expire_deletes_only_old_finished_threads(self, store: Store) -> None:
        old_done = make_checkpoint("old-done", 1, status="done")
        old_waiting = make_checkpoint("old-waiting", 1, status="interrupted")
        new_done = msgspec.structs.replace(
            make_checkpoint("new-done", 1, status="done"), created_at=T0 + 500
        )
        for record in (old_done, old_waiting, new_done):
            await store.append_checkpoint(record, expected_head=None)
        assert await store.expire(older_than=T0 + 100, limit=0) == []
        assert await store.expire(older_than=T0 + 100) == ["old-done"]
        assert await store.get_thread("old-done") is None
        assert await store.get_checkpoint("old-done") is None
        assert await store.get_thread("old-waiting") is not None
        assert await store.get_thread("new-done") is not None
        assert await store.expire(older_than=T0 + 100) == []
