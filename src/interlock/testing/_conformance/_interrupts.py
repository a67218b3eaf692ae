"""`InterruptConformance`: resolutions, and what `Store.pending` lists and counts."""

from __future__ import annotations

import msgspec
import pytest

from ..._errors import (
    InterruptAlreadyResolved,
    ThreadBusy,
    UnknownInterrupt,
)
from ...stores._base import (
    PendingFilter,
    Resolution,
    Store,
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

__all__ = ["InterruptConformance"]


class InterruptConformance(ConformanceGroup):
    """Interrupts and the inbox: resolutions, and what `Store.pending` lists.

    Interrupts leave ``pending`` at most once, by the resolutions of an append, applied in
    order: one that targets an interrupt which is not pending (`InterruptAlreadyResolved`) or
    not the thread's (`UnknownInterrupt`, listing the pending ones) refuses the whole append,
    and the head is checked before any of them. The inbox lists exactly the pending
    interrupts, oldest first with ties in append order, filtered by `PendingFilter` and paged
    by the ``after`` cursor without losing or repeating any. `Store.pending_counts` counts,
    per tool (None for the tool-less), exactly the rows `Store.pending` lists for a filter.
    """

    async def test_resolution_moves_interrupt_out_of_pending(self, store: Store) -> None:
        (first,) = await grow(store, "t", 1, interrupts=["a", "b"])
        second = make_checkpoint("t", 2, status="interrupted")
        await store.append_checkpoint(
            second, expected_head=first.id, resolutions=[resolve("a", value=b"yes")]
        )
        a = await store.get_interrupt("a")
        assert a is not None
        assert (a.status, a.resolved_at, a.resolution) == ("resolved", T0 + 10_000, b"yes")
        assert await store.get_interrupt("b") == make_interrupt("b", first)
        assert [i.id for i in await store.pending(PendingFilter(thread="t"))] == ["b"]
        assert [i.id for i in await store.pending()] == ["b"]
        thread = await store.get_thread("t")
        assert thread is not None
        assert (thread.head_id, thread.status) == (second.id, "interrupted")

    async def test_second_resolution_is_refused_with_the_status(self, store: Store) -> None:
        (first,) = await grow(store, "t", 1, interrupts=["a"])
        second = make_checkpoint("t", 2)
        await store.append_checkpoint(
            second, expected_head=first.id, resolutions=[resolve("a", "expired")]
        )
        before = await snapshot(store, ["t"], ["a"])
        with pytest.raises(InterruptAlreadyResolved) as caught:
            await store.append_checkpoint(
                make_checkpoint("t", 3), expected_head=second.id, resolutions=[resolve("a")]
            )
        assert (caught.value.interrupt_id, caught.value.status) == ("a", "expired")
        assert await snapshot(store, ["t"], ["a"]) == before

    async def test_unknown_interrupt_lists_the_pending_ones(self, store: Store) -> None:
        (first,) = await grow(store, "t", 1, interrupts=["a", "b"])
        await grow(store, "other", 1, interrupts=["elsewhere"])
        before = await snapshot(store, ["t", "other"], ["a", "b", "elsewhere"])
        for target in ("ghost", "elsewhere"):
            with pytest.raises(UnknownInterrupt) as caught:
                await store.append_checkpoint(
                    make_checkpoint("t", 2), expected_head=first.id, resolutions=[resolve(target)]
                )
            assert caught.value.target == target
            assert caught.value.thread == "t"
            assert caught.value.pending == ("a", "b")
        assert await snapshot(store, ["t", "other"], ["a", "b", "elsewhere"]) == before

    async def test_one_bad_resolution_rolls_back_the_whole_append(self, store: Store) -> None:
        (first,) = await grow(store, "t", 1, interrupts=["a", "b", "done"])
        second = make_checkpoint("t", 2)
        await store.append_checkpoint(
            second, expected_head=first.id, resolutions=[resolve("done", "cancelled")]
        )
        ids = ["a", "b", "done", "c"]
        before = await snapshot(store, ["t"], ids)
        third = make_checkpoint("t", 3)
        attempts: list[tuple[type[Exception], list[Resolution]]] = [
            (UnknownInterrupt, [resolve("a"), resolve("ghost")]),
            (InterruptAlreadyResolved, [resolve("a"), resolve("done")]),
            (InterruptAlreadyResolved, [resolve("b"), resolve("a"), resolve("b")]),
        ]
        for error, resolutions in attempts:
            with pytest.raises(error):
                await store.append_checkpoint(
                    third,
                    expected_head=second.id,
                    new_interrupts=[make_interrupt("c", third)],
                    resolutions=resolutions,
                )
            assert await snapshot(store, ["t"], ids) == before
        assert await store.get_checkpoint("t", third.id) is None

    async def test_head_is_checked_before_resolutions(self, store: Store) -> None:
        first, _ = await grow(store, "t", 2, interrupts=["a"])
        with pytest.raises(ThreadBusy):
            await store.append_checkpoint(
                make_checkpoint("t", 3), expected_head=first.id, resolutions=[resolve("ghost")]
            )

    async def test_pending_is_oldest_first_and_filters(self, store: Store) -> None:
        a1 = make_checkpoint("a", 1)
        b1 = make_checkpoint("b", 1)
        await store.append_checkpoint(
            a1,
            expected_head=None,
            new_interrupts=[
                make_interrupt("a-late", a1, key="k", created_at=T0 + 50),
                make_interrupt("a-early", a1, created_at=T0 + 10),
            ],
        )
        await store.append_checkpoint(
            b1,
            expected_head=None,
            new_interrupts=[
                make_interrupt("b-first", b1, key="k", created_at=T0 + 5),
                make_interrupt("b-mid", b1, key="other", created_at=T0 + 30),
            ],
        )

        async def ids(
            thread: str | None = None, key: str | None = None, limit: int = 100
        ) -> list[str]:
            return [
                i.id
                for i in await store.pending(PendingFilter(thread=thread, key=key), limit=limit)
            ]

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
        assert await store.pending(PendingFilter(thread="a", key="k")) == [
            make_interrupt("a-late", a1, key="k", created_at=T0 + 50)
        ]

    async def test_pending_ties_keep_append_order(self, store: Store) -> None:
        order = ["m", "c", "x", "a", "q"]
        await grow(store, "t", 1, interrupts=order[:3])
        await grow(store, "u", 1, interrupts=order[3:])  # same created_at as thread t's
        assert [i.id for i in await store.pending()] == order

    async def test_resolved_interrupts_leave_the_inbox(self, store: Store) -> None:
        (first,) = await grow(store, "t", 1, interrupts=["a", "b", "c"])
        second = make_checkpoint("t", 2)
        await store.append_checkpoint(
            second,
            expected_head=first.id,
            resolutions=[resolve("a"), resolve("c", "expired", None)],
        )
        assert [i.id for i in await store.pending()] == ["b"]
        assert [i.id for i in await store.pending(PendingFilter(thread="t"))] == ["b"]
        await store.append_checkpoint(
            make_checkpoint("t", 3),
            expected_head=second.id,
            resolutions=[resolve("b", "cancelled")],
        )
        assert await store.pending() == []
        assert await store.pending(PendingFilter(thread="t")) == []

    async def test_pending_pages_with_after_and_filters_by_deadline(self, store: Store) -> None:
        first = make_checkpoint("a", 1)
        second = make_checkpoint("b", 1)
        a_rows = [
            make_interrupt(f"a{n}", first, created_at=T0 + n % 3, deadline=T0 + 50 + n)
            for n in range(5)
        ]
        b_rows = [make_interrupt(f"b{n}", second, created_at=T0 + 1, key="k") for n in range(3)]
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
        by_thread = [
            i.id for i in await store.pending(PendingFilter(thread="a"), limit=2, after="a0")
        ]
        assert by_thread == [i for i in everything if i.startswith("a")][1:3]
        soon = await store.pending(PendingFilter(deadline_before=T0 + 53))
        assert sorted(i.id for i in soon) == ["a0", "a1", "a2"]  # b* have no deadline
        assert [i.id for i in await store.pending(PendingFilter(key="k"), after="b0")] == [
            "b1",
            "b2",
        ]

    async def test_pending_filters_by_tool_and_age(self, store: Store) -> None:
        first = make_checkpoint("a", 1)
        rows = [
            msgspec.structs.replace(
                make_interrupt(f"i{n}", first, created_at=T0 + n), tool="mail" if n % 2 else "shell"
            )
            for n in range(6)
        ]
        await store.append_checkpoint(first, expected_head=None, new_interrupts=rows)
        assert [i.id for i in await store.pending(PendingFilter(tool="mail"))] == ["i1", "i3", "i5"]
        assert [i.id for i in await store.pending(PendingFilter(tool="mail"), after="i1")] == [
            "i3",
            "i5",
        ]
        assert [i.id for i in await store.pending(PendingFilter(older_than=T0 + 2))] == ["i0", "i1"]
        assert [
            i.id for i in await store.pending(PendingFilter(tool="shell", older_than=T0 + 3))
        ] == [
            "i0",
            "i2",
        ]
        assert (await store.get_interrupt("i1")) == rows[1]

    async def test_pending_counts_agree_with_pending_per_tool(self, store: Store) -> None:
        first = make_checkpoint("a", 1)
        second = make_checkpoint("b", 1)
        tools = ["mail", "shell", None]
        a_rows = [
            msgspec.structs.replace(
                make_interrupt(
                    f"a{n}",
                    first,
                    created_at=T0 + n,
                    deadline=T0 + 50 + n,
                    key="k" if n % 2 else None,
                ),
                tool=tools[n % 3],
            )
            for n in range(7)
        ]
        b_rows = [
            msgspec.structs.replace(make_interrupt(f"b{n}", second, key="k"), tool=tools[n % 2])
            for n in range(4)
        ]
        await store.append_checkpoint(first, expected_head=None, new_interrupts=a_rows)
        await store.append_checkpoint(second, expected_head=None, new_interrupts=b_rows)
        filters = [
            None,
            PendingFilter(),
            PendingFilter(thread="a"),
            PendingFilter(thread="b", key="k"),
            PendingFilter(key="k"),
            PendingFilter(tool="mail"),
            PendingFilter(tool="absent"),
            PendingFilter(older_than=T0 + 3),
            PendingFilter(deadline_before=T0 + 54),
            PendingFilter(thread="a", tool="shell", older_than=T0 + 5),
            PendingFilter(thread="nobody"),
        ]

        async def agree() -> dict[str | None, int]:
            for where in filters:
                counted: dict[str | None, int] = {}
                for row in await store.pending(where, limit=1000):
                    counted[row.tool] = counted.get(row.tool, 0) + 1
                assert await store.pending_counts(where) == counted, where
            return await store.pending_counts()

        assert await agree() == {"mail": 5, "shell": 4, None: 2}
        await store.append_checkpoint(
            make_checkpoint("a", 2),
            expected_head=first.id,
            resolutions=[resolve("a0"), resolve("a2", "expired", None), resolve("a3", "cancelled")],
        )
        assert await agree() == {"mail": 3, "shell": 4, None: 1}
        assert await store.pending_counts(PendingFilter(tool="mail")) == {"mail": 3}
        assert await store.pending_counts(PendingFilter(thread="nobody")) == {}
