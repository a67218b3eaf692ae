"""The agents layer's docstring examples run as written (docs/agents.md runs through the root
conftest.py, and checks itself)."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize("module", ["_agent", "_tools", "_models"])
def test_docstring_examples_run(module: str) -> None:
    mod = importlib.import_module(f"interlock.agents.{module}")
    failures, tried = doctest.testmod(mod, raise_on_error=False)
    assert tried > 0 and failures == 0
