"""Fixtures the A2A tests share."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """The A2A SDK's server and client run on asyncio (its tasks are ``asyncio`` tasks)."""
    return "asyncio"
