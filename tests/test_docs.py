"""The examples/ scripts run as written.

The README's and the documentation's own blocks run through the root conftest.py (Sybil),
with the checks of what they do in the pages themselves; docstring examples run in
tests/test_docs_site.py."""

from __future__ import annotations

import re
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


PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FROM_THE_INDEX = re.compile(r"pip install '?interlock\[(\w+)\]")


def _shell_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", text, re.S)


def test_an_install_from_the_index_comes_with_the_install_from_a_clone() -> None:
    # interlock is not on a package index yet: a page's `pip install 'interlock[x]'` fails
    # as written, and the page must say how to install from a clone.
    missing = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for block in _shell_blocks(text):
            for extra in FROM_THE_INDEX.findall(block):
                if f"'./interlock[{extra}]'" not in text and f"'.[{extra}]'" not in text:
                    missing.append(f"{page.relative_to(ROOT)}: interlock[{extra}]")
    assert missing == []


def test_the_tutorial_installs_from_a_clone_first() -> None:
    text = (ROOT / "docs" / "tutorial.md").read_text(encoding="utf-8")
    first = _shell_blocks(text)[0]
    assert "git clone " in first
    installs = [line for line in first.splitlines() if line.startswith("pip install")]
    assert installs == ["pip install './interlock[server]'"]  # a path: no index is asked
