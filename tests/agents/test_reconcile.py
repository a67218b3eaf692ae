"""An agent's tool call cut short by a crash: the reconcile question shows the call."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import anyio
import pytest
from _crashing_agent import ARGUMENTS, build

from interlock import SqliteStore
from interlock.agents import AssistantMessage, conversation

pytestmark = pytest.mark.anyio

SCRIPT = Path(__file__).with_name("_crashing_agent.py")


def _an_hour_later() -> float:
    # The dead process's lease is long expired on this clock: no waiting for it.
    return time.time() + 3600


# The crash happens in a process of its own; one event loop is enough for the rest.
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_tool_call_cut_by_a_crash_is_reconciled_with_the_call_shown(
    tmp_path: Path,
) -> None:
    db, ledger = tmp_path / "agent.db", tmp_path / "ledger"
    out = await anyio.run_process([sys.executable, str(SCRIPT), str(db), str(ledger)], check=False)
    assert out.returncode == 9, out.stderr.decode()
    approval = json.loads(out.stdout)  # what the approver was shown
    assert ledger.read_text() == "/srv/report.txt: quarterly numbers\n"  # the call acted

    async with SqliteStore(db, clock=_an_hour_later) as store:
        app = build(str(ledger), crash=False).compile(store=store)
        asked = await app.resume("s")
        (question,) = asked.interrupts
        assert question.kind == "reconcile"
        info = question.info
        # The call as the approval question showed it: who called what, with what, where.
        for field in ("agent", "tool", "call_id", "arguments", "address", "description"):
            assert info[field] == approval[field], field
        assert (info["agent"], info["tool"], info["arguments"]) == (
            "writer",
            "write_file",
            ARGUMENTS,
        )
        assert info["address"] == str(question.address)
        assert info["effect"] == "tool:write_file" and info["attempt"] == 1
        assert info["key"].startswith("s/")
        shown = json.dumps(ARGUMENTS, separators=(",", ":"))
        assert info["question"].startswith(
            f"writer called write_file({shown}) (call {approval['call_id']}), but the call's "
            "outcome was never recorded"
        )
        # The inbox, which every surface reads, holds the same question.
        (row,) = await app.inbox(thread="s")
        assert row.id == question.id and row.info == info
        # The command line's inbox names the call's tool, not only "reconcile".
        listed = await anyio.run_process(
            [sys.executable, "-m", "interlock.cli", "inbox", "--store", f"sqlite:///{db}"],
            env={**os.environ, "COLUMNS": "120"},
        )
        (line, *_) = [x for x in listed.stdout.decode().splitlines() if question.id in x]
        assert "reconcile:write_file" in line, line
        # The person finds the file written and says so: the tool is not called again.
        done = await app.resume("s", {question.id: {"result": "wrote 17 characters"}})
    assert done.status == "done"
    last = conversation(done.values["messages"])[-1]
    assert isinstance(last, AssistantMessage) and last.content == "done: wrote 17 characters"
    assert ledger.read_text() == "/srv/report.txt: quarterly numbers\n"
