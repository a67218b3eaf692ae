"""The A2A caller against a remote built with the JavaScript SDK (``js/remote.mjs``, Node.js):
the same question in the local inbox, the same answer on the same task."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from _remote import APPROVAL, QUESTION, REQUEST, local_agent

from interlock.agents import AssistantMessage, ToolMessage, conversation

pytestmark = pytest.mark.anyio

FOLDER = Path(__file__).with_name("js")
CALL = "node:tools/agent:ops/tool:deployer:call_0_0"


@pytest.fixture(scope="module")
def js_remote() -> Iterator[str]:
    """``node remote.mjs`` on a free loopback port; its URL."""
    if not (FOLDER / "node_modules" / "@a2a-js" / "sdk").is_dir():
        pytest.fail(
            f"the JavaScript remote needs its packages: run `npm ci` in {FOLDER}", pytrace=False
        )
    proc = subprocess.Popen(
        ["node", "remote.mjs"], cwd=FOLDER, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        line = proc.stdout.readline().decode()
        found = re.search(r"serving on (http://127\.0\.0\.1:\d+)", line)
        assert found, f"the JavaScript remote did not start: {line}{proc.stderr.read().decode()}"
        yield found.group(1)
    finally:
        proc.terminate()
        proc.wait(15)
        proc.stdout.close()
        proc.stderr.close()


def _counts(url: str) -> dict[str, Any]:
    answered: dict[str, Any] = httpx.get(f"{url}/counts").json()
    return answered


async def test_a_js_remote_question_is_decided_locally_and_its_task_completes(
    js_remote: str, sqlite_files: Any, tmp_path: Path
) -> None:
    app = local_agent(js_remote).compile(store=sqlite_files(tmp_path / "local.db"))
    asked = await app.run({"messages": [REQUEST]}, thread="js1")
    (question,) = await app.inbox(thread="js1")
    assert [i.id for i in asked.interrupts] == [question.id]
    task = question.info["task"]
    mine = [c for c in _counts(js_remote)["created"] if c[0] == task]
    assert mine == [[task, question.info["context"], REQUEST]]
    assert str(question.address) == f"{CALL}/a2a:{task}"
    assert question.info["state"] == "auth-required"
    assert question.info["text"] == [QUESTION] and question.info["data"] == [APPROVAL]

    done = await app.resume("js1", {question.id: True}, actor="ana")

    last = conversation(done.values["messages"])[-1]
    assert isinstance(last, AssistantMessage)
    assert last.content == "Remote says: deployed web to prod"
    counts = _counts(js_remote)
    assert [c for c in counts["created"] if c[0] == task] == mine  # one task, the same one
    assert [a for a in counts["answers"] if a[0] == task] == [[task, [], [True]]]


async def test_a_js_remote_task_rejected_is_a_tool_error(
    js_remote: str, sqlite_files: Any, tmp_path: Path
) -> None:
    app = local_agent(js_remote).compile(store=sqlite_files(tmp_path / "local.db"))
    await app.run({"messages": [REQUEST]}, thread="js2")
    (question,) = await app.inbox(thread="js2")
    task = question.info["task"]
    done = await app.resume("js2", {question.id: "not today"}, actor="ana")
    tool_message = conversation(done.values["messages"])[-2]
    assert isinstance(tool_message, ToolMessage) and tool_message.status == "error"
    assert tool_message.content.endswith(f"ended task {task} rejected: refused: not today")
    assert [a for a in _counts(js_remote)["answers"] if a[0] == task] == [[task, ["not today"], []]]
