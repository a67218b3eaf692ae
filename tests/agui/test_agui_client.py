"""The AG-UI endpoint driven by a client nobody here wrote: npm's ``@ag-ui/client``.

`client/drive.mjs` runs an ``HttpAgent`` against the endpoint on loopback: a run that ends on
the tool call's interrupt, then a resume that approves, edits or rejects it; and a resume that
races a decision posted at the same moment to the approval server's decide route.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from _agui_serving import ALREADY, RUNS, TOKENS, agui_only, beside_server, ops_app, serving

from interlock import App

CLIENT = Path(__file__).parent / "client"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(
    NODE is None, reason="these tests drive the endpoint with Node.js's @ag-ui/client: no node"
)


@pytest.fixture(autouse=True)
def _no_runs() -> Iterator[None]:
    RUNS.clear()
    yield
    RUNS.clear()


def drive(**config: Any) -> dict[str, Any]:
    """Run `client/drive.mjs` with ``config``; what it saw."""
    if not (CLIENT / "node_modules" / "@ag-ui" / "client").is_dir():
        pytest.fail(
            f"@ag-ui/client is not installed: run `npm ci` in {CLIENT} (as .ci/run does)",
            pytrace=False,
        )
    assert NODE is not None
    done = subprocess.run(
        [NODE, "drive.mjs", json.dumps(config)],
        cwd=CLIENT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "agents.db"


@pytest.fixture
def reader(db: Path) -> Iterator[App[Any]]:
    app = ops_app(db)
    yield app
    anyio.run(app.store.close)


@pytest.mark.parametrize(
    ("resume", "ran", "answer"),
    [
        ({"status": "resolved", "payload": {"action": "approve"}}, ["rm -rf /tmp/x"], None),
        (
            {"status": "resolved", "payload": {"action": "edit", "arguments": {"command": "ls"}}},
            ["ls"],
            None,
        ),
        (
            {"status": "resolved", "payload": {"action": "reject", "message": "not that"}},
            [],
            "Done: not that",
        ),
    ],
    ids=["approve", "edit", "reject"],
)
def test_the_ag_ui_client_runs_sees_the_interrupt_and_resumes(
    db: Path, reader: App[Any], resume: dict[str, Any], ran: list[str], answer: str | None
) -> None:
    with serving(agui_only(db)) as base:
        seen = drive(
            url=base + "/",
            token=TOKENS["ana"][0],
            thread="c1",
            command="rm -rf /tmp/x",
            resume=resume,
        )

    first, second = seen["first"], seen["second"]
    assert "thrown" not in first and "thrown" not in second, seen
    assert first["outcome"] == "interrupt"
    (interrupt,) = seen["pending"]
    assert interrupt["reason"] == "tool_approval"
    assert interrupt["metadata"]["interlock"]["tool"] == "execute"
    assert interrupt["metadata"]["interlock"]["arguments"] == {"command": "rm -rf /tmp/x"}
    assert interrupt["metadata"]["interlock"]["authority"]["groups"] == ["ops"]
    assert reader.inbox_sync() == []  # decided by now: nothing pending

    assert second["outcome"] == "success"
    assert second["errors"] == []
    assert seen["after"] == []  # no interrupt left in the client
    assert ran == RUNS  # the tool ran once, or not at all
    roles = [m["role"] for m in seen["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"]
    final = seen["messages"][-1]["content"]
    assert final == (answer or f"Done: ran: {ran[0]}")
    question = reader.question_sync(interrupt["id"])
    assert question is not None and question.decision is not None
    assert question.decision.actor == "ana"


def test_a_refused_resume_reaches_the_client_as_a_run_error(db: Path, reader: App[Any]) -> None:
    with serving(agui_only(db)) as base:
        seen = drive(
            url=base + "/",
            token=TOKENS["ben"][0],  # not in group ops
            thread="c2",
            command="rm -rf /tmp/x",
            resume={"status": "resolved", "payload": {"action": "approve"}},
        )

    (error,) = seen["second"]["errors"]
    assert error["code"] == "not_authorized"
    assert "needs a member of group ops" in error["message"]
    (interrupt,) = seen["pending"]
    question = reader.question_sync(interrupt["id"])
    assert question is not None and question.status == "pending" and question.decision is None
    assert RUNS == []


@pytest.mark.parametrize("after", ["sent", "headers", "before"])
def test_a_resume_racing_a_decision_in_the_approval_server_decides_once(
    db: Path, reader: App[Any], after: str
) -> None:
    with serving(beside_server(db)) as base:
        seen = drive(
            url=base + "/agui",
            token=TOKENS["ana"][0],
            thread="c3",
            command="rm -rf /tmp/x",
            resume={"status": "resolved", "payload": {"action": "approve"}},
            race={"server": base, "token": TOKENS["olga"][0], "after": after},
        )
        # The winner's continuation has ended once the client's run has (the endpoint waits
        # for a thread someone else continues); the server's background may still be
        # letting go of it.
        state = reader.get_state_sync("c3")

    assert "thrown" not in seen["first"], seen
    (interrupt,) = seen["pending"]
    question = reader.question_sync(interrupt["id"])
    assert question is not None and question.decision is not None
    winner = question.decision.actor
    assert winner == "olga" or after != "before"  # sent once olga's decision was answered
    http, second = seen["http"], seen["second"]
    assert "thrown" not in second, seen
    if winner == "ana":
        assert http["status"] == 409, http
        assert http["body"]["error"] == "already_decided"
        assert "already decided by ana" in http["body"]["message"]
        assert [c for c in second["custom"] if c["name"] == ALREADY] == []
    else:
        assert winner == "olga"
        assert http["status"] == 201, http
        (told,) = [c for c in second["custom"] if c["name"] == ALREADY]
        assert told["value"]["actor"] == "olga"
    assert state.status == "done"
    audit = anyio.run(lambda: reader.store.audit_log(thread="c3"))
    assert [(e.kind, e.actor) for e in audit if e.kind == "decision"] == [("decision", winner)]
    assert RUNS == ["rm -rf /tmp/x"]  # the tool ran once, whoever won
    assert seen["messages"][-1]["content"] == "Done: ran: rm -rf /tmp/x"
