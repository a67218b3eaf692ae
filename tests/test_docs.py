"""The examples/ scripts run as written.

The README's and the documentation's own blocks run through the root conftest.py (Sybil),
with the checks of what they do in the pages themselves; docstring examples run in
tests/test_docs_site.py."""

from __future__ import annotations

import runpy
from pathlib import Path

import anyio
import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_approval_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    module = runpy.run_path(str(ROOT / "examples" / "approval.py"))
    log = anyio.run(module["main"], str(tmp_path / "ex.db"))
    assert log == ["reviewed: approved", "paid ¥5000 to ada"]


def test_effects_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    module = runpy.run_path(str(ROOT / "examples" / "effects.py"))
    log, paid = anyio.run(module["main"], str(tmp_path / "ex.db"))
    assert paid == [5000]  # the bank paid once, though the node's call "failed"
    assert log == ["paid ¥5000: confirmed by the bank (1)"]
