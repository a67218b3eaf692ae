"""The local process killed while its call waits on a remote A2A agent: a new process goes on
with the same remote task (the remote counts the tasks it creates: exactly one)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from _remote import REQUEST, Remote, local_agent, respond, serve_remote
from a2a.client import Client, ClientConfig, ClientFactory

from _crashes import stops_with
from interlock import SqliteStore
from interlock.a2a import remote_agent
from interlock.agents import AssistantMessage, ScriptedModel, ToolAgent, conversation

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


class Crash(BaseException):
    """Stands for the process ending: nothing more is recorded."""


class CrashAfterSend:
    """A client whose process ends once the remote accepted the request, before the caller
    could record the task it made."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def send_message(self, request: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async with aclosing(self.client.send_message(request, **kwargs)) as events:
            async for event in events:
                assert event.HasField("task")  # the remote made the task...
                raise Crash  # ...and the process ends before anyone records it
        yield  # an async generator, as the SDK's client is

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


async def test_a_crash_between_send_and_record_asks_a_person_with_the_context_to_look_for(
    tmp_path: Path,
) -> None:
    db = tmp_path / "local.db"
    with serve_remote() as remote:
        client = await ClientFactory(ClientConfig(streaming=False)).create_from_url(remote.url)
        try:
            crashing = remote_agent("deployer", remote.url, client=CrashAfterSend(client))
            agent = ToolAgent("ops", ScriptedModel(respond), [crashing])
            async with SqliteStore(db) as store:
                await stops_with(
                    agent.compile(store=store).run({"messages": [REQUEST]}, thread="s"), Crash
                )
        finally:
            await client.close()
        ((task, context, _),) = remote.deployer.created

        async with SqliteStore(db, clock=_an_hour_later) as store:
            app = local_agent(remote.url).compile(store=store)
            asked = await app.resume("s")
            (reconcile,) = asked.interrupts
            # Never a silent second request: a person is asked, shown the context to look for.
            assert reconcile.kind == "reconcile"
            assert reconcile.info["context"] == context
            assert reconcile.info["request"] == REQUEST
            assert context in reconcile.info["question"]
            assert len(remote.deployer.created) == 1
            # The person finds the task on the remote side and says so: the call goes on with it.
            found = {"result": {"task": task, "context": context}}
            again = await app.resume("s", {reconcile.id: found}, actor="ana")
            (question,) = again.interrupts
            assert str(question.address) == f"{CALL}/a2a:{task}"
            done = await app.resume("s", {question.id: True}, actor="ana")
    last = conversation(done.values["messages"])[-1]
    assert isinstance(last, AssistantMessage)
    assert last.content == "Remote says: deployed web to prod"
    assert len(remote.deployer.created) == 1
