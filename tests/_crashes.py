"""Awaiting a run that a test makes crash midway (an exception outside `Exception`)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import pytest


async def stops_with(call: Awaitable[Any], kind: type[BaseException]) -> None:
    """Await ``call``, which must stop with ``kind`` (trio's task groups wrap it in a group)."""
    try:
        await call
    except BaseException as exc:  # the crash is what this waits for
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        if not isinstance(exc, kind):
            raise
    else:
        pytest.fail("the run did not stop at the crash")
