"""Code in the README, the docs and examples/ runs as written."""

from __future__ import annotations

import doctest
import re
import runpy
from pathlib import Path

import anyio
import pytest

import interlock

ROOT = Path(__file__).resolve().parents[1]


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), re.S)


def test_readme_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (block,) = python_blocks(ROOT / "README.md")
    scope: dict[str, object] = {}
    exec(compile(block, "README.md", "exec"), scope)
    app = scope["app"]
    assert isinstance(app, interlock.App)
    state = app.get_state_sync("order-42")
    assert state.status == "done" and state.values == {"approved": True, "log": ["refunded"]}
    anyio.run(app.store.close)


def test_concepts_example_is_valid_python() -> None:
    for block in python_blocks(ROOT / "docs" / "concepts.md"):
        compile(block, "concepts.md", "exec")


def test_approval_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    module = runpy.run_path(str(ROOT / "examples" / "approval.py"))
    log = anyio.run(module["main"], str(tmp_path / "ex.db"))
    assert log == ["reviewed: approved", "paid ¥5000 to ada"]


def test_docstring_examples_run() -> None:
    from interlock.runtime import _graph

    failures, tried = doctest.testmod(_graph, raise_on_error=False)
    assert tried > 0 and failures == 0


def test_effects_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    module = runpy.run_path(str(ROOT / "examples" / "effects.py"))
    log, paid = anyio.run(module["main"], str(tmp_path / "ex.db"))
    assert paid == [5000]  # the bank paid once, though the node's call "failed"
    assert log == ["paid ¥5000: confirmed by the bank (1)"]
