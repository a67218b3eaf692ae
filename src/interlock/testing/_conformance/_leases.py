"""Leases and fencing: one executor per thread, and a stale one kept out (`LeaseConformance`)."""

from __future__ import annotations

import pytest

from ..._errors import (
    FencedOut,
    ThreadBusy,
)
from ...stores._base import (
    Store,
)
from .._clock import FakeClock
from ._common import (
    ConformanceGroup,
    make_checkpoint,
    make_fence,
    outlive,
)

__all__ = ["LeaseConformance"]


class LeaseConformance(ConformanceGroup):
    """Leases and fencing: one executor per thread, and a stale one kept out.

    A write under a `Fence` holds the thread's lease: it acquires it with a higher token
    while no other executor's lease is live, holds it with that token, and lets it go on
    ``release``. Another executor is refused (`ThreadBusy`) while the lease is live; once it
    took the lease over, the stale holder is fenced out (`FencedOut`) of every write. A lease
    expires by the store's clock: build the store with the ``clock`` fixture and these tests
    move time instead of waiting for it.
    """

    async def test_lease_is_acquired_held_and_released_by_writes(self, store: Store) -> None:
        one, two, three = (make_checkpoint("t", n) for n in (1, 2, 3))
        token = await store.append_checkpoint(one, expected_head=None, fence=make_fence("a", None))
        assert token == 1
        # Another executor is refused while the lease is live, and nothing is written.
        with pytest.raises(ThreadBusy) as busy:
            await store.append_checkpoint(two, expected_head=one.id, fence=make_fence("b", None))
        assert busy.value.holder == "a" and not isinstance(busy.value, FencedOut)
        with pytest.raises(ThreadBusy):
            await store.append_checkpoint(two, expected_head=one.id)  # no fence: still refused
        assert (await store.get_thread("t")).head_id == one.id  # type: ignore[union-attr]
        assert (
            await store.append_checkpoint(two, expected_head=one.id, fence=make_fence("a", 1)) == 1
        )
        await store.append_checkpoint(
            three, expected_head=two.id, fence=make_fence("a", 1, release=True)
        )
        # Released: the next executor acquires it with a higher token.
        four = make_checkpoint("t", 4)
        assert (
            await store.append_checkpoint(four, expected_head=three.id, fence=make_fence("b", None))
            == 2
        )

    async def test_stale_executor_is_fenced_out(self, store: Store, clock: FakeClock) -> None:
        one, two, three = (make_checkpoint("t", n) for n in (1, 2, 3))
        await store.append_checkpoint(
            one, expected_head=None, fence=make_fence("a", None, ttl=0.05)
        )
        await outlive(clock, 0.1)  # a's lease expires while it stalls
        assert (
            await store.append_checkpoint(two, expected_head=one.id, fence=make_fence("b", None))
            == 2
        )
        with pytest.raises(FencedOut) as fenced:
            await store.append_checkpoint(three, expected_head=two.id, fence=make_fence("a", 1))
        assert (fenced.value.token, fenced.value.current) == (1, 2)
        with pytest.raises(FencedOut):
            await store.renew_lease("t", make_fence("a", 1))
        with pytest.raises(FencedOut):
            await store.begin_effect("t", "k", name="x", fence=make_fence("a", 1))
        assert await store.get_effect("t", "k") is None
        assert (await store.get_thread("t")).head_id == two.id  # type: ignore[union-attr]
        await store.renew_lease("t", make_fence("b", 2, release=True))
        # b released it: a write without a lease goes through again.
        await store.append_checkpoint(three, expected_head=two.id)

    async def test_renewing_needs_a_held_token(self, store: Store) -> None:
        one = make_checkpoint("t", 1)
        token = await store.append_checkpoint(one, expected_head=None, fence=make_fence("a", None))
        with pytest.raises(ValueError, match="fencing token of a held lease"):
            await store.renew_lease("t", make_fence("a", None))
        # Refused before touching the lease: another executor is still kept out.
        with pytest.raises(ThreadBusy):
            await store.append_checkpoint(
                make_checkpoint("t", 2), expected_head=one.id, fence=make_fence("b", None)
            )
        await store.renew_lease("t", make_fence("a", token, release=True))

    async def test_an_expired_lease_nobody_took_still_holds(
        self, store: Store, clock: FakeClock
    ) -> None:
        one, two = make_checkpoint("t", 1), make_checkpoint("t", 2)
        await store.append_checkpoint(
            one, expected_head=None, fence=make_fence("a", None, ttl=0.01)
        )
        await outlive(clock, 0.05)
        assert (
            await store.append_checkpoint(two, expected_head=one.id, fence=make_fence("a", 1)) == 1
        )

    async def test_a_lease_lasts_its_ttl_on_the_store_clock_from_each_write(
        self, store: Store, clock: FakeClock
    ) -> None:
        one, two = make_checkpoint("t", 1), make_checkpoint("t", 2)
        await store.append_checkpoint(one, expected_head=None, fence=make_fence("a", None, ttl=10))
        if not clock.reads:
            pytest.skip("the store keeps its own time: build it with the clock fixture")
        other = make_fence("b", None)
        clock.advance(9.5)
        with pytest.raises(ThreadBusy):
            await store.append_checkpoint(two, expected_head=one.id, fence=other)
        await store.renew_lease("t", make_fence("a", 1, ttl=10))  # 10 s from now, not from then
        clock.advance(9.5)
        with pytest.raises(ThreadBusy):
            await store.begin_effect("t", "k", name="x", fence=other)
        clock.advance(1)
        assert await store.append_checkpoint(two, expected_head=one.id, fence=other) == 2
