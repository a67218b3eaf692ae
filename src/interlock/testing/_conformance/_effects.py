"""Effects: a dangerous call is started at most once per key (`EffectConformance`)."""

from __future__ import annotations

import anyio
import pytest

from ..._errors import (
    StoreError,
)
from ...stores._base import (
    Store,
)
from ._common import (
    ConformanceGroup,
    make_checkpoint,
    make_fence,
)

__all__ = ["EffectConformance"]


class EffectConformance(ConformanceGroup):
    """Effects: a dangerous call is started at most once per key.

    An effect is started at most once per key, even by concurrent callers, unless a retry of
    a ``started`` one is asked for; its outcome is recorded once (the same result again is a
    no-op, another one an error), and a ``done`` effect is never started again.
    """

    async def test_effect_starts_once_then_finishes(self, store: Store) -> None:
        one = make_checkpoint("t", 1)
        token = await store.append_checkpoint(one, expected_head=None, fence=make_fence("a", None))
        fence = make_fence("a", token)
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

    async def test_an_outcome_recorded_lazily_reads_back_and_stays_fenced(
        self, store: Store
    ) -> None:
        # durable=False only lets the commit skip waiting for the disk: the same rules hold.
        one = make_checkpoint("t", 1)
        token = await store.append_checkpoint(one, expected_head=None, fence=make_fence("a", None))
        fence = make_fence("a", token)
        await store.begin_effect("t", "k", name="send", fence=fence)
        await store.finish_effect("t", "k", result=b"sent", fence=fence, durable=False)
        done = await store.get_effect("t", "k")
        assert done is not None and done.status == "done" and done.result == b"sent"
        with pytest.raises(StoreError):
            await store.finish_effect("t", "k", result=b"other", fence=fence, durable=False)
        # A durable commit after it works as usual (a store that switches levels switches back).
        await store.begin_effect("t", "k2", name="send", fence=fence)
        await store.finish_effect("t", "k2", result=None, fence=fence)
        assert (await store.get_effect("t", "k2")).status == "done"  # type: ignore[union-attr]

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
