"""Pause requests: asked for from anywhere, taken once by the executor (`PauseConformance`)."""

from __future__ import annotations

import pytest

from ...stores._base import (
    Store,
)
from ._common import (
    ConformanceGroup,
    grow,
)

__all__ = ["PauseConformance"]


class PauseConformance(ConformanceGroup):
    """Pause requests: asked for from anywhere, taken once by the executor.

    A pause request is kept for an existing thread until an executor takes it, once. A
    ``forced`` request replaces a ``planned`` one, never the other way round; deleting the
    thread drops it; a kind that is not a `PauseKind` is refused.
    """

    async def test_pause_requests_are_taken_once(self, store: Store) -> None:
        assert not await store.request_pause("nobody")
        await grow(store, "t", 1)
        assert await store.take_pause_request("t") is None
        assert await store.request_pause("t")
        assert await store.request_pause("t", kind="forced")
        assert await store.request_pause("t")  # planned never downgrades forced
        assert await store.take_pause_request("t") == "forced"
        assert await store.take_pause_request("t") is None
        assert await store.request_pause("t")
        await store.delete_thread("t")
        assert await store.take_pause_request("t") is None

    async def test_a_request_is_planned_unless_forced_and_its_kind_is_checked(
        self, store: Store
    ) -> None:
        await grow(store, "t", 1)
        assert await store.request_pause("t", kind="planned")
        assert await store.request_pause("t")
        assert await store.take_pause_request("t") == "planned"
        for bad in ("now", True, None):
            with pytest.raises(ValueError, match="kind"):
                await store.request_pause("t", kind=bad)  # type: ignore[arg-type]
        assert await store.take_pause_request("t") is None
