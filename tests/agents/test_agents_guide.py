"""docs/agents.md and the agents layer's docstring examples run as written."""

from __future__ import annotations

import doctest
import importlib
import re
from pathlib import Path

import anyio
import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_agents_guide_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    text = (ROOT / "docs" / "agents.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 3
    scope: dict[str, object] = {}
    for block in blocks:
        exec(compile(block, "agents.md", "exec"), scope)
    printed = capsys.readouterr().out.splitlines()
    assert printed == [
        "node:tools/agent:ops/tool:execute:call_0_0",
        "{'command': 'rm -rf /tmp/build'}",
        "Done: ran: rm -rf /tmp/build",
        "2",
        "interrupted ('alice',)",
        "Done: ran: sudo systemctl restart web",
        "waiting: ops execute call_0_0",
        "Done: not today",
    ]
    anyio.run(scope["app"].store.close)  # type: ignore[attr-defined]
    anyio.run(scope["quorum_app"].store.close)  # type: ignore[attr-defined]


@pytest.mark.parametrize("module", ["_agent", "_tools", "_models"])
def test_docstring_examples_run(module: str) -> None:
    mod = importlib.import_module(f"interlock.agents.{module}")
    failures, tried = doctest.testmod(mod, raise_on_error=False)
    assert tried > 0 and failures == 0
