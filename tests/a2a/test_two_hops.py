"""Two interlock agents over A2A: one calls the other as a tool, and the question the remote
agent asks is decided in the caller's inbox.

The remote is interlock's own A2A server (``_serve_helpers.serving``: an ``ops`` agent whose
``deploy`` waits for approval by group sre); the caller is a `ToolAgent` with `remote_agent`
as its one tool, calling with ana's token. The remote's approval question crosses the wire
intact, waits in the local inbox under the local call's address, is decided there once, and
the answer — sent on the remote task — is recorded remotely as ana's decision: the tool runs
once and the local thread ends with the remote answer. Both sides stop and start again while
the question waits, and nothing is lost.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from _serve_helpers import RAN, TOKENS, ops_app, serving
from a2a.client import ClientConfig, ClientFactory

from interlock import App, InterruptAlreadyResolved
from interlock.a2a import remote_agent
from interlock.agents import ScriptedModel, ToolAgent, ToolMessage, call

pytestmark = pytest.mark.anyio


def _caller(url: str, client: Any) -> ToolAgent:
    def script(messages: Any, tools: Any) -> Any:
        if isinstance(messages[-1], ToolMessage):
            return f"The ops agent says: {messages[-1].content}"
        return call("ops", {"request": "deploy web"})

    ops = remote_agent("ops", url, client=client, poll_interval=0.05)
    return ToolAgent("desk", ScriptedModel(script), [ops])


@asynccontextmanager
async def _client(url: str) -> AsyncIterator[Any]:
    """The SDK's client for the remote, calling with ana's token."""
    headers = {"Authorization": f"Bearer {TOKENS['ana'][0]}"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        client = await ClientFactory(ClientConfig(httpx_client=http)).create_from_url(url)
        try:
            yield client
        finally:
            await client.close()


async def test_a_remote_interlock_question_is_decided_in_the_local_inbox(
    tmp_path: Path, sqlite_files: Any
) -> None:
    RAN.clear()
    remote_db, local_db = tmp_path / "remote.db", tmp_path / "local.db"
    with serving(remote_db) as served:
        async with _client(served.url) as client:
            app: App[Any] = _caller(served.url, client).compile(store=sqlite_files(local_db))
            asked = await app.run({"messages": ["ship it"]}, thread="desk-1")
            assert asked.status == "interrupted" and RAN == []

    # Both sides stop while the question waits, and start again: a new remote server on the
    # same file and port, a new local App on the same file.
    port = int(served.url.rstrip("/").rsplit(":", 1)[1])
    with serving(remote_db, port=port) as served:
        async with _client(served.url) as client:
            app = _caller(served.url, client).compile(store=sqlite_files(local_db))
            (question,) = await app.inbox(thread="desk-1")
            task = question.info["task"]
            assert str(question.address) == f"node:tools/agent:desk/tool:ops:call_0_0/a2a:{task}"
            assert question.info["state"] == "auth-required"
            # What the remote inbox would show, intact: its own address, tool and arguments.
            (remote,) = question.info["data"]
            assert remote["address"] == "node:tools/agent:ops/tool:deploy:call_ops_0_0"
            assert (remote["tool"], remote["arguments"]) == ("deploy", {"service": "web"})
            assert remote["thread"] == task

            await app.decide("desk-1", {question.id: "approve"}, actor="lee")
            with pytest.raises(InterruptAlreadyResolved):
                await app.decide("desk-1", {question.id: "reject"}, actor="kim")
            done = await app.resume("desk-1")

        assert done.status == "done"
        assert done.values["messages"][-1].content == "The ops agent says: Done: deployed web"
        assert RAN == ["web"]  # the remote tool ran once, after the local decision

    # The remote recorded the decision as made by the identity the caller called with.
    remote_app = ops_app(remote_db)
    try:
        decided = await remote_app.question(remote["interrupt"])
        assert decided is not None and decided.decision is not None
        assert decided.decision.actor == "ana"
        assert (await remote_app.get_state(task)).status == "done"
    finally:
        await remote_app.store.close()
