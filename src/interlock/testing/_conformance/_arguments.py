"""`ArgumentConformance`: the bad calls every backend refuses alike, before writing."""

from __future__ import annotations

import msgspec
import pytest

from ..._errors import (
    StoreError,
)
from ...stores._base import (
    AuditEntry,
    PendingFilter,
    Store,
)
from ._common import (
    ConformanceGroup,
    grow,
    make_checkpoint,
    make_entry,
    make_interrupt,
    resolve,
    snapshot,
)

__all__ = ["ArgumentConformance"]


class ArgumentConformance(ConformanceGroup):
    """Argument checks: the bad calls every backend refuses alike, before writing.

    Every backend refuses the same bad calls with the same errors, before anything is
    written: arguments that contradict each other, text no backend can store (a lone
    surrogate, a value that is not a str), and words outside the closed vocabularies (an
    audit or interrupt kind, a pause kind, an inbox filter that is not a `PendingFilter`).
    """

    async def test_contradictory_arguments_are_refused(self, store: Store) -> None:
        (first,) = await grow(store, "t", 1, interrupts=["a"])
        second = make_checkpoint("t", 2)
        before = await snapshot(store, ["t"], ["a", "x"])
        with pytest.raises(ValueError, match="pending"):
            await store.append_checkpoint(
                second, expected_head=first.id, resolutions=[resolve("a", "pending")]
            )
        with pytest.raises(ValueError, match="InterruptStatus"):
            await store.append_checkpoint(
                second,
                expected_head=first.id,
                resolutions=[resolve("a", "approved")],  # type: ignore[arg-type]
            )
        with pytest.raises(ValueError, match="belong"):
            await store.append_checkpoint(
                second, expected_head=first.id, new_interrupts=[make_interrupt("x", first)]
            )
        assert await snapshot(store, ["t"], ["a", "x"]) == before

    async def test_an_append_that_cannot_be_stored_leaves_nothing(self, store: Store) -> None:
        (first,) = await grow(store, "t", 1, interrupts=["a"])
        before = await snapshot(store, ["t"], ["a", "b"])
        bad = make_checkpoint("bad\ud800", 1, body=b"body")
        with pytest.raises(ValueError, match=r"record\.thread"):
            await store.append_checkpoint(
                bad,
                expected_head=None,
                new_interrupts=[make_interrupt("b", bad)],
                audit=[make_entry("interrupt", 1)],
            )
        # An audit entry that cannot be hashed fails the append after every check passed.
        second = make_checkpoint("t", 2)
        with pytest.raises((TypeError, ValueError, StoreError)):
            await store.append_checkpoint(
                second,
                expected_head=first.id,
                new_interrupts=[make_interrupt("b", second)],
                resolutions=[resolve("a")],
                audit=[AuditEntry(kind="edit", actor=None, data=object())],  # type: ignore[arg-type]
            )
        assert await snapshot(store, ["t"], ["a", "b"]) == before
        assert await store.audit_log() == []

    async def test_arguments_no_backend_can_store_are_refused_by_name(self, store: Store) -> None:
        await grow(store, "t", 1, interrupts=["a"])
        lone = "t\udc80"
        with pytest.raises(ValueError, match="thread"):
            await store.get_checkpoint(lone)
        with pytest.raises(ValueError, match="thread"):
            await store.get_thread(lone)
        with pytest.raises(ValueError, match="key"):
            await store.pending(PendingFilter(key=lone))
        with pytest.raises(ValueError, match="after"):
            await store.pending(after=lone)
        with pytest.raises(ValueError, match="tool"):
            await store.pending_counts(PendingFilter(tool=lone))
        with pytest.raises(ValueError, match="thread"):
            await store.audit_log(thread=lone)
        with pytest.raises(TypeError, match="thread"):
            await store.get_checkpoint(None)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="thread"):
            await store.append_checkpoint(make_checkpoint(None, 1), expected_head=None)  # type: ignore[arg-type]
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

    async def test_words_outside_the_closed_vocabularies_are_refused(self, store: Store) -> None:
        (first,) = await grow(store, "t", 1)
        before = await snapshot(store, ["t"], ["x"])
        second = make_checkpoint("t", 2)
        sudden = msgspec.structs.replace(make_interrupt("x", second), kind="sudden")
        with pytest.raises(ValueError, match="kind 'sudden'"):
            await store.append_checkpoint(second, expected_head=first.id, new_interrupts=[sudden])
        note = AuditEntry(kind="note", actor=None, data=b"{}")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="audit kind 'note'"):
            await store.append_checkpoint(second, expected_head=first.id, audit=[note])
        with pytest.raises(ValueError, match="audit kind 'note'"):
            await store.begin_effect("t", "k", name="x", fence=None, audit=[note])
        with pytest.raises(ValueError, match="audit kind 'note'"):
            await store.finish_effect("t", "k", result=None, fence=None, audit=[note])
        assert await store.get_effect("t", "k") is None
        assert await snapshot(store, ["t"], ["x"]) == before
        assert await store.audit_log() == []

    async def test_an_inbox_filter_must_be_a_pending_filter(self, store: Store) -> None:
        await grow(store, "t", 1, interrupts=["a"])
        for where in ("t", {"thread": "t"}):
            with pytest.raises(TypeError, match="PendingFilter"):
                await store.pending(where)  # type: ignore[arg-type]
            with pytest.raises(TypeError, match="PendingFilter"):
                await store.pending_counts(where)  # type: ignore[arg-type]
        assert [i.id for i in await store.pending(None)] == ["a"]
        assert [i.id for i in await store.pending(PendingFilter())] == ["a"]
        assert await store.pending_counts(None) == {None: 1}
        assert await store.pending_counts(PendingFilter()) == {None: 1}
