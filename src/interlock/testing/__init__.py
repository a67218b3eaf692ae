"""Helpers for testing interlock code and the backends it runs on.

`StoreConformance` is the test suite every `interlock.stores.Store` must pass; subclass it to
check a store of your own. Importing this module needs pytest.
"""

from __future__ import annotations

import pytest

# Plain asserts in the suite should explain their failures like asserts in test files do.
pytest.register_assert_rewrite("interlock.testing._conformance")

from ._conformance import StoreConformance as StoreConformance  # noqa: E402

__all__ = ["StoreConformance"]
