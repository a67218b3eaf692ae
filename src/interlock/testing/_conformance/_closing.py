"""Closing: idempotent, and final (`ClosingConformance`)."""

from __future__ import annotations

import pytest

from ..._errors import (
    StoreClosed,
)
from ...stores._base import (
    Store,
)
from ._common import (
    ConformanceGroup,
    grow,
    make_checkpoint,
)

__all__ = ["ClosingConformance"]


class ClosingConformance(ConformanceGroup):
    """Closing: idempotent, and final.

    `close` may be called any number of times; every call after it raises `StoreClosed`.
    """

    async def test_close_is_idempotent_and_later_calls_raise(self, store: Store) -> None:
        (first,) = await grow(store, "t", 1)
        await store.close()
        await store.close()
        with pytest.raises(StoreClosed):
            await store.append_checkpoint(make_checkpoint("t", 2), expected_head=first.id)
        with pytest.raises(StoreClosed):
            await store.get_checkpoint("t")
        with pytest.raises(StoreClosed):
            await store.get_checkpoint("t", first.id)
        with pytest.raises(StoreClosed):
            await store.checkpoint_range("t", lo=1, hi=1)
        with pytest.raises(StoreClosed):
            await store.checkpoints_at("t", [1])
        with pytest.raises(StoreClosed):
            await store.list_checkpoints("t")
        with pytest.raises(StoreClosed):
            await store.get_thread("t")
        with pytest.raises(StoreClosed):
            await store.get_interrupt("i")
        with pytest.raises(StoreClosed):
            await store.pending()
        with pytest.raises(StoreClosed):
            await store.pending_counts()
        with pytest.raises(StoreClosed):
            await store.delete_thread("t")
