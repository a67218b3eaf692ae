"""``async with`` support shared by the store backends."""

from __future__ import annotations

from types import TracebackType
from typing import Self

__all__ = ["StoreLifecycle"]


class StoreLifecycle:
    """``async with store:`` opens the store at once (a bad location fails there) and closes it."""

    async def open(self) -> None:
        """Connect now rather than on first use (nothing to do for an in-memory store)."""

    async def close(self) -> None:
        """Release resources. Idempotent."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
