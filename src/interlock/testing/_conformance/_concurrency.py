"""Concurrency: concurrent writers of one thread never both win (`ConcurrencyConformance`)."""

from __future__ import annotations

import itertools

import anyio

from ..._errors import (
    ThreadBusy,
)
from ...stores._base import (
    Store,
)
from ._common import (
    EVERYTHING,
    ConformanceGroup,
    grow,
    make_checkpoint,
    make_interrupt,
    resolve,
)

__all__ = ["ConcurrencyConformance"]


class ConcurrencyConformance(ConformanceGroup):
    """Concurrency: concurrent writers of one thread never both win.

    Exactly one of many concurrent appends on the same head succeeds (the others get
    `ThreadBusy`), writers that retry build one unbroken chain, and an append cancelled
    mid-way is all or nothing.
    """

    async def test_exactly_one_writer_wins_per_head(self, store: Store) -> None:
        (first,) = await grow(store, "t", 1)
        go = anyio.Event()
        won: list[str] = []
        lost: list[str] = []

        async def writer(name: str) -> None:
            await go.wait()
            record = make_checkpoint("t", 2, id=name, parent_id=first.id)
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
        await grow(store, "t", 1)
        wins: list[str] = []

        async def writer(name: str, count: int) -> None:
            for n in range(count):
                while True:
                    head = await store.get_thread("t")
                    assert head is not None
                    mine = f"{name}.{n}"
                    record = make_checkpoint(
                        "t", head.head_seq + 1, id=mine, parent_id=head.head_id
                    )
                    try:
                        await store.append_checkpoint(record, expected_head=head.head_id)
                    except ThreadBusy:
                        continue
                    wins.append(mine)
                    break

        async with anyio.create_task_group() as tg:
            for w in range(8):
                tg.start_soon(writer, f"w{w}", 10)
        chain = await store.checkpoint_range("t", lo=1, hi=EVERYTHING)
        assert [c.seq for c in chain] == list(range(1, 82))
        assert all(c.parent_id == p.id for p, c in itertools.pairwise(chain))
        assert sorted(c.id for c in chain[1:]) == sorted(wins)

    async def test_cancelled_append_is_all_or_nothing(self, store: Store) -> None:
        (first,) = await grow(store, "t", 1, interrupts=["a"])
        second = make_checkpoint("t", 2)
        with anyio.CancelScope() as scope:
            scope.cancel()
            await store.append_checkpoint(
                second,
                expected_head=first.id,
                new_interrupts=[make_interrupt("b", second)],
                resolutions=[resolve("a")],
            )
        head = await store.get_thread("t")
        assert head is not None
        written = head.head_id == second.id
        assert (await store.get_checkpoint("t", second.id) is not None) == written
        assert (await store.get_interrupt("b") is not None) == written
        assert [i.id for i in await store.pending()] == (["b"] if written else ["a"])
        # Whatever happened, the store goes on from its real head.
        await grow(store, "t", 1)
