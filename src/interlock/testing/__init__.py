"""Helpers for testing interlock code and the backends it runs on.

`StoreConformance` is the test suite every `interlock.stores.Store` must pass; subclass it to
check a store of your own. `FakeClock` is a clock that moves only when told to: give it to a
store (``MemoryStore(clock=clock)``) to let a lease run out without waiting. The suite is a
pytest test class, so importing this module needs pytest: ``pip install 'interlock[testing]'``.
"""

from __future__ import annotations

try:
    import pytest
except ImportError as exc:
    raise ImportError(
        "interlock.testing needs pytest; install it with: pip install 'interlock[testing]'"
    ) from exc

# Plain asserts in the suite (a package: all its modules) should explain their failures like
# asserts in test files do.
pytest.register_assert_rewrite("interlock.testing._conformance")

from .._public import publish  # noqa: E402
from ._clock import FakeClock as FakeClock  # noqa: E402
from ._conformance import StoreConformance as StoreConformance  # noqa: E402

__all__ = ["FakeClock", "StoreConformance"]

publish(__name__, globals(), __all__)
