"""Helpers for testing interlock code and the backends it runs on.

`StoreConformance` is the test suite every `interlock.stores.Store` must pass; subclass it to
check a store of your own. It is a pytest test class, so importing this module needs pytest:
``pip install 'interlock[testing]'``.
"""

from __future__ import annotations

try:
    import pytest
except ImportError as exc:
    raise ImportError(
        "interlock.testing needs pytest; install it with: pip install 'interlock[testing]'"
    ) from exc

# Plain asserts in the suite should explain their failures like asserts in test files do.
pytest.register_assert_rewrite("interlock.testing._conformance")

from ._conformance import StoreConformance as StoreConformance  # noqa: E402

__all__ = ["StoreConformance"]
