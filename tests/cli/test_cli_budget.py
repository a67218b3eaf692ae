"""An agent's budget question from the command line: listed with its tool, shown with the
limits it proposes, and raised with ``interlock edit`` (an edit outside the limits' schema is
refused, nothing recorded)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from interlock.cli import cli
from interlock.runtime import usage_of

AGENT = Path(__file__).resolve().parents[1] / "agents" / "_budget_agent.py"
WIDE = {"COLUMNS": "200"}


@pytest.fixture
def budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module ``budgetapp`` whose ``app`` is the budget agent on ``b.db``, stopped at its
    budget question; return the question's id."""
    (tmp_path / "budgetapp.py").write_text(
        AGENT.read_text() + '\n\napp = build("b.db")\n', encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "budgetapp", raising=False)
    import budgetapp  # type: ignore[import-not-found]

    result = budgetapp.app.run_sync({"messages": ["add"]}, thread="b")
    try:
        yield result.interrupt().id
    finally:
        anyio.run(budgetapp.app.store.close)


def interlock(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), env=WIDE)
    assert result.exit_code == 0, result.output
    return result.output


def test_the_inbox_lists_it_and_show_gives_the_limits_proposed(budget: str) -> None:
    listed = interlock("inbox", "--store", "sqlite:///b.db")
    assert budget in listed and "tool:budget" in listed
    shown = interlock("show", budget, "--store", "sqlite:///b.db", "--json")
    info = json.loads(shown)["info"]
    assert info["arguments"] == {"tokens": 60000}
    assert info["question"].startswith("This run has used 40,000 tokens")


def test_an_edit_raises_the_limit_and_the_run_finishes(budget: str) -> None:
    refused = CliRunner().invoke(
        cli,
        ["edit", budget, "--arguments", '{"tokens": "more"}', "--app", "budgetapp:app"],
        env=WIDE,
    )
    assert refused.exit_code != 0 and "tokens" in refused.output
    assert budget in interlock("inbox", "--store", "sqlite:///b.db")  # still waiting

    out = interlock(
        "edit",
        budget,
        "--arguments",
        '{"tokens": 100000}',
        "--app",
        "budgetapp:app",
        "--actor",
        "ana",
    )
    assert 'Recorded: edit to {"tokens": 100000}' in out and "Thread b is done." in out
    import budgetapp

    totals = usage_of(budgetapp.app.get_state_sync("b").metadata)
    assert totals.run.calls == 5 and totals.grants == {"adder:run": {"tokens": 100000}}
