"""The local process killed while its call waits on a remote A2A agent: a new process goes on
with the same remote task (the remote counts the tasks it creates: exactly one)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from _remote import REQUEST, Remote, local_agent, serve_remote

from interlock import SqliteStore
from interlock.agents import AssistantMessage, conversation

pytestmark = pytest.mark.anyio

SCRIPT = Path(__file__).with_name("_remote.py")
CALL = "node:tools/agent:ops/tool:deployer:call_0_0"


def _an_hour_later() -> float:
    # The killed process's lease on the thread is long expired on this clock: no waiting.
    return time.time() + 3600


@contextmanager
def _local_process(remote: Remote, db: Path, *extra: str) -> Iterator[subprocess.Popen[bytes]]:
    """The local agent running thread ``s`` in a process of its own; killed on the way out."""
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), remote.url, str(db), "s", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=SCRIPT.parent,
        env=os.environ.copy(),
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        proc.stderr.close()


async def _finish(db: Path, remote: Remote) -> None:
    """In this process: the question is in the inbox at the same remote task; approving it
    completes that task, and no second task was ever created."""
    async with SqliteStore(db, clock=_an_hour_later) as store:
        app = local_agent(remote.url).compile(store=store)
        pending = await app.inbox(thread="s")
        if not pending:  # killed before the question: the thread goes on from its checkpoint
            asked = await app.resume("s")
            assert asked.status == "interrupted"
            pending = await app.inbox(thread="s")
        ((task, _, request),) = remote.deployer.created
        assert request == REQUEST
        (question,) = pending
        assert str(question.address) == f"{CALL}/a2a:{task}"
        done = await app.resume("s", {question.id: True}, actor="ana")
    assert done.status == "done"
    last = conversation(done.values["messages"])[-1]
    assert isinstance(last, AssistantMessage)
    assert last.content == "Remote says: deployed web to prod"
    assert len(remote.deployer.created) == 1  # the same task, never a second one
    assert remote.deployer.answers == [(task, [], [True])]


# The kills happen in a process of its own; one event loop is enough for the rest.
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_killed_while_waiting_on_the_remote_task_the_next_process_goes_on_with_it(
    tmp_path: Path,
) -> None:
    db = tmp_path / "local.db"
    with serve_remote(held=True) as remote:
        with _local_process(remote, db) as proc:
            # The call asks for the task's state only once its id is recorded: kill it then,
            # while the remote task is still working.
            assert await anyio.to_thread.run_sync(remote.polled.wait, 60), "no call came"
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
        assert len(remote.deployer.created) == 1
        remote.deployer.gate.set()  # the remote task goes on, and asks
        await _finish(db, remote)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_killed_after_the_question_is_committed_the_next_process_answers_it(
    tmp_path: Path,
) -> None:
    db = tmp_path / "local.db"
    with serve_remote() as remote:
        with _local_process(remote, db, "--until-asked") as proc:
            assert proc.stdout is not None
            line = await anyio.to_thread.run_sync(proc.stdout.readline)
            assert line == b"asked\n", proc.stderr.read().decode() if proc.stderr else ""
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
        await _finish(db, remote)
