"""Helpers for testing interlock code and the backends it runs on.

`StoreConformance` is the test suite every `interlock.stores.Store` must pass; subclass it to
check a store of your own. `ModelConformance` is the one every chat-model adapter must pass,
against a mock of its provider's server that a `ModelServer` scripts. `FakeClock` is a clock
that moves only when told to: give it to a store (``MemoryStore(clock=clock)``) to let a lease
run out without waiting. Each suite is a pytest test class, so importing this module needs
pytest: ``pip install 'interlock[testing]'``.
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
pytest.register_assert_rewrite(
    "interlock.testing._conformance", "interlock.testing._model_conformance"
)

from .._public import publish  # noqa: E402
from ._clock import FakeClock as FakeClock  # noqa: E402
from ._conformance import StoreConformance as StoreConformance  # noqa: E402
from ._model_conformance import ModelConformance as ModelConformance  # noqa: E402
from ._model_conformance import ModelServer as ModelServer  # noqa: E402
from ._model_conformance import ScriptedCalls as ScriptedCalls  # noqa: E402
from ._model_conformance import ScriptedDelay as ScriptedDelay  # noqa: E402
from ._model_conformance import ScriptedError as ScriptedError  # noqa: E402
from ._model_conformance import ScriptedMalformed as ScriptedMalformed  # noqa: E402
from ._model_conformance import ScriptedReply as ScriptedReply  # noqa: E402
from ._model_conformance import ScriptedText as ScriptedText  # noqa: E402

__all__ = [
    "FakeClock",
    "ModelConformance",
    "ModelServer",
    "ScriptedCalls",
    "ScriptedDelay",
    "ScriptedError",
    "ScriptedMalformed",
    "ScriptedReply",
    "ScriptedText",
    "StoreConformance",
]

publish(__name__, globals(), __all__)
