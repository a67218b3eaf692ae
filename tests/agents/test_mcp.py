"""Tools from MCP servers, against a real server process (tests/agents/_mcp_server.py)."""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from interlock._errors import InterlockError
from interlock.agents._mcp import MCPError, MCPServer, MCPTimeout, MCPToolFailed
from interlock.agents._messages import ToolCall
from interlock.agents._tools import ArgumentsError, Tool

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).with_name("_mcp_server.py")
SILENT = Path(__file__).with_name("_mcp_silent.py")
TOOLS = ["add", "echo", "shout", "picture", "fail", "count", "crash", "header"]


@dataclass
class Logs:
    """Files the test server writes: a line per process started, a line per `count` run."""

    pids: Path
    count: Path

    def env(self) -> dict[str, str]:
        return {"MCP_TEST_PIDS": str(self.pids), "MCP_TEST_COUNT": str(self.count)}

    def started(self) -> list[int]:
        return [int(line) for line in _lines(self.pids)]

    def counted(self) -> int:
        return len(_lines(self.count))


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def logs(tmp_path: Path) -> Logs:
    return Logs(pids=tmp_path / "pids", count=tmp_path / "count")


def stdio(logs: Logs, *extra: str, **limits: float) -> MCPServer:
    return MCPServer.stdio(sys.executable, [str(SERVER), *extra], env=logs.env(), **limits)


@pytest.fixture
def server(logs: Logs) -> MCPServer:
    return stdio(logs)


@pytest.fixture
async def connected(server: MCPServer, logs: Logs) -> AsyncIterator[MCPServer]:
    """The server, with one session open for the test (tests not about connections use it)."""
    async with server.connect():
        yield server
    assert len(logs.started()) == 1, "the test's calls did not all use the fixture's session"


def by_name(tools: list[Tool]) -> dict[str, Tool]:
    return {t.name: t for t in tools}


async def run(tool: Tool, **arguments: Any) -> Any:
    """Call a tool the way an agent does: check the arguments, then run it."""
    call = ToolCall(id="c1", name=tool.name, arguments=arguments)
    return await tool.run(tool.check(arguments), call, None)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# -- listing ----------------------------------------------------------------------------------


async def test_tools_carry_the_servers_names_descriptions_and_schemas(connected: MCPServer) -> None:
    tools = by_name(await connected.tools())
    assert list(tools) == TOOLS
    add = tools["add"]
    assert add.description == "Add two integers."
    assert add.parameters["type"] == "object"
    assert add.parameters["required"] == ["a", "b"]
    assert {k: v["type"] for k, v in add.parameters["properties"].items()} == {
        "a": "integer",
        "b": "integer",
    }
    assert tools["shout"].parameters["properties"]["times"]["default"] == 1
    assert not add.streaming
    assert add.dangerous is None and add.idempotent is False


async def test_include_and_exclude_filter(connected: MCPServer) -> None:
    assert [t.name for t in await connected.tools(include=["echo", "add"])] == ["add", "echo"]
    assert [t.name for t in await connected.tools(exclude={"crash", "fail", "nope"})] == [
        "add",
        "echo",
        "shout",
        "picture",
        "count",
        "header",
    ]
    both = await connected.tools(include=["add", "echo"], exclude=["echo"])
    assert [t.name for t in both] == ["add"]


async def test_include_of_a_tool_the_server_lacks_names_it(connected: MCPServer) -> None:
    with pytest.raises(MCPError, match=r"no tool named 'nope' \(given in include=\)") as err:
        await connected.tools(include=["add", "nope"])
    assert "add, echo" in str(err.value)


async def test_names_must_be_a_collection_not_a_string(server: MCPServer) -> None:
    with pytest.raises(TypeError, match=r"include=\['search'\]"):
        await server.tools(include="add")


async def test_dangerous_and_idempotent_apply_to_every_tool_or_by_name(
    connected: MCPServer,
) -> None:
    every = await connected.tools(include=["add", "echo"], dangerous=True)
    assert [t.dangerous for t in every] == [True, True]
    named = by_name(
        await connected.tools(dangerous={"count": True, "add": False}, idempotent={"echo": True})
    )
    assert (named["count"].dangerous, named["count"].idempotent) == (True, False)
    assert (named["add"].dangerous, named["add"].idempotent) == (False, False)
    assert (named["echo"].dangerous, named["echo"].idempotent) == (None, True)
    assert named["fail"].dangerous is None
    with pytest.raises(MCPError, match=r"no tool named 'cont' \(given in dangerous=\)"):
        await connected.tools(dangerous={"cont": True})
    with pytest.raises(ValueError, match="'add' cannot be both dangerous and idempotent"):
        await connected.tools(dangerous=True, idempotent={"add": True})


async def test_a_tool_name_interlock_cannot_take_is_named(logs: Logs) -> None:
    server = stdio(logs, "--dotted")
    async with server.connect():
        with pytest.raises(MCPError, match=r"'dotted\.name'.*exclude=\['dotted\.name'\]"):
            await server.tools()
        assert "dotted.name" not in [t.name for t in await server.tools(exclude=["dotted.name"])]


# -- calling ----------------------------------------------------------------------------------


async def test_check_refuses_arguments_the_servers_schema_refuses(connected: MCPServer) -> None:
    add = by_name(await connected.tools())["add"]
    with pytest.raises(ArgumentsError):
        add.check({"a": "one", "b": 2})
    with pytest.raises(ArgumentsError):
        add.check({"a": 1})
    with pytest.raises(ArgumentsError):
        add.check([1, 2])
    # No conversion: what fits the schema is passed on as given.
    assert add.check({"a": 1, "b": 2}) == {"a": 1, "b": 2}


async def test_a_call_returns_the_structured_result(connected: MCPServer) -> None:
    tools = by_name(await connected.tools())
    assert await run(tools["add"], a=2, b=40) == {"result": 42}
    assert await run(tools["echo"], text="héllo") == {"result": "héllo"}


async def test_text_parts_are_joined_with_newlines(connected: MCPServer) -> None:
    shout = by_name(await connected.tools())["shout"]
    assert await run(shout, text="hey", times=3) == "HEY\nHEY\nHEY"
    assert await run(shout, text="once") == "ONCE"


async def test_other_content_comes_back_as_json_blocks(connected: MCPServer) -> None:
    picture = by_name(await connected.tools())["picture"]
    text, image = await run(picture, caption="a dot")
    assert text == {"type": "text", "text": "a dot"}
    assert image["type"] == "image" and image["mimeType"] == "image/png"
    assert base64.b64decode(image["data"]) == b"not really a png"


async def test_the_tool_body_runs_once_per_call(server: MCPServer, logs: Logs) -> None:
    count = by_name(await server.tools())["count"]
    for n in range(1, 4):
        assert await run(count, label=f"call {n}") == {"result": str(n)}
        assert logs.counted() == n
    assert _lines(logs.count) == ["call 1", "call 2", "call 3"]


async def test_an_error_result_raises_with_the_servers_message(connected: MCPServer) -> None:
    fail = by_name(await connected.tools())["fail"]
    with pytest.raises(MCPToolFailed, match="the disk is on fire") as err:
        await run(fail)
    assert err.value.tool == "fail"
    assert err.value.server == connected.target
    assert not isinstance(err.value, InterlockError)


async def test_call_tool_calls_by_name(server: MCPServer) -> None:
    assert await server.call_tool("add", {"a": 1, "b": 1}) == {"result": 2}
    with pytest.raises(MCPToolFailed, match="Unknown tool: nope"):
        await server.call_tool("nope", {})


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_tools_work_from_later_event_loops(logs: Logs, backend: str) -> None:
    # Each anyio.run stands for another process resuming the run: nothing of the first loop's
    # connection may be needed by the later ones.
    server = stdio(logs)
    tools = by_name(anyio.run(server.tools, backend=backend))

    async def count() -> Any:
        return await run(tools["count"])

    assert anyio.run(count, backend=backend) == {"result": "1"}
    assert anyio.run(count, backend=backend) == {"result": "2"}
    assert len(set(logs.started())) == 3
    assert not any(alive(pid) for pid in logs.started())


async def test_each_call_outside_connect_starts_its_own_server(
    server: MCPServer, logs: Logs
) -> None:
    add = by_name(await server.tools())["add"]
    for _ in range(3):
        await run(add, a=1, b=1)
    assert len(set(logs.started())) == 4  # the listing, then one per call
    assert not any(alive(pid) for pid in logs.started())


# -- one session for a block ------------------------------------------------------------------


async def test_connect_keeps_one_session_for_every_call(server: MCPServer, logs: Logs) -> None:
    async with server.connect() as connected:
        assert connected is server
        assert repr(server).endswith("connected>")
        tools = by_name(await server.tools())
        for n in range(3):
            await run(tools["count"], label=str(n))
        assert await run(tools["add"], a=5, b=6) == {"result": 11}
        with pytest.raises(MCPToolFailed):  # an error answer leaves the session usable
            await run(tools["fail"])
        assert await run(tools["echo"], text="still here") == {"result": "still here"}
        (pid,) = logs.started()
        assert alive(pid)
    assert logs.counted() == 3
    assert not alive(pid)
    assert not repr(server).endswith("connected>")


async def test_calls_from_tasks_started_in_the_block_share_its_session(
    server: MCPServer, logs: Logs
) -> None:
    tools = by_name(await server.tools())
    results: dict[int, Any] = {}

    async def add(n: int) -> None:
        results[n] = await run(tools["add"], a=n, b=n)

    async with server.connect(), anyio.create_task_group() as tg:
        for n in range(5):
            tg.start_soon(add, n)
    assert results == {n: {"result": 2 * n} for n in range(5)}
    assert len(logs.started()) == 2  # the listing, then the block


async def test_tasks_started_before_the_block_do_not_use_its_session(
    server: MCPServer, logs: Logs
) -> None:
    inside = anyio.Event()
    answered = anyio.Event()

    async def outsider() -> None:
        await inside.wait()
        await server.call_tool("echo", {"text": "from outside"})
        answered.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(outsider)
        async with server.connect():
            await server.call_tool("echo", {"text": "from inside"})
            inside.set()
            await answered.wait()
    assert len(set(logs.started())) == 2


async def test_an_equal_server_and_a_nested_block_share_the_session(
    server: MCPServer, logs: Logs
) -> None:
    twin = stdio(logs)
    assert twin == server and hash(twin) == hash(server) and twin is not server
    async with server.connect():
        async with twin.connect():
            await twin.call_tool("add", {"a": 1, "b": 2})
        await server.call_tool("add", {"a": 1, "b": 2})
    assert len(logs.started()) == 1


async def test_an_exception_leaves_the_block_as_it_was_raised(
    server: MCPServer, logs: Logs
) -> None:
    async def block() -> None:
        async with server.connect():
            await server.call_tool("echo", {"text": "x"})
            raise LookupError("from the block")

    with pytest.raises(LookupError, match="from the block") as err:
        await block()
    assert type(err.value) is LookupError
    (pid,) = logs.started()
    assert not alive(pid)


async def test_a_cancelled_block_closes_its_session(server: MCPServer, logs: Logs) -> None:
    with anyio.CancelScope() as scope:
        async with server.connect():
            await server.call_tool("echo", {"text": "x"})
            scope.cancel()
            await anyio.sleep_forever()
    assert scope.cancelled_caught
    (pid,) = logs.started()
    assert not alive(pid)


async def test_a_call_cancelled_inside_the_block_leaves_the_session_usable(
    server: MCPServer, logs: Logs
) -> None:
    async with server.connect():
        with anyio.CancelScope() as scope:
            scope.cancel()
            await server.call_tool("echo", {"text": "never"})
        assert await server.call_tool("echo", {"text": "after"}) == {"result": "after"}
    assert len(logs.started()) == 1


# -- failures ---------------------------------------------------------------------------------


async def test_a_command_that_does_not_exist_is_named(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-mcp-server")
    server = MCPServer.stdio(missing, ["--flag"])
    with pytest.raises(MCPError, match="cannot start MCP server") as err:
        await server.tools()
    assert f"{missing} --flag" in str(err.value)
    assert err.value.server == f"{missing} --flag"
    assert isinstance(err.value, InterlockError)
    with pytest.raises(MCPError, match="no-such-mcp-server"):
        async with server.connect():
            pass  # pragma: no cover


async def test_a_server_that_exits_at_once_is_named(tmp_path: Path) -> None:
    server = MCPServer.stdio(sys.executable, ["-c", "pass"])
    with pytest.raises(MCPError, match="closed the connection while listing its tools") as err:
        await server.tools()
    assert sys.executable in str(err.value)


async def test_a_crash_raises_and_later_calls_in_the_block_reconnect(
    server: MCPServer, logs: Logs
) -> None:
    with pytest.raises(MCPError, match="closed the connection while calling tool 'crash'"):
        await server.call_tool("crash", {})
    async with server.connect():
        with pytest.raises(MCPError, match="closed the connection") as err:
            await server.call_tool("crash", {})
        assert err.value.server == server.target
        assert repr(server).endswith("broken>")
        assert await server.call_tool("add", {"a": 1, "b": 1}) == {"result": 2}
    assert len(logs.started()) == 3


# -- time limits ------------------------------------------------------------------------------

# Each test's limit is short; the guard around it only stops a regression from hanging the
# suite (the limit is the SDK's and the server's to keep, not something these tests time).
GUARD = 60


async def test_a_server_that_never_answers_at_start_up_times_out(logs: Logs) -> None:
    server = MCPServer.stdio(
        sys.executable, ["-S", str(SILENT)], env=logs.env(), connect_timeout=0.5
    )
    with anyio.fail_after(GUARD), pytest.raises(MCPTimeout) as err:
        await server.tools()
    error = err.value
    assert isinstance(error, MCPError) and isinstance(error, InterlockError)
    assert (error.phase, error.limit, error.server) == ("connect", 0.5, server.target)
    message = str(error)
    assert f"MCP server {server.target} did not finish starting within 0.5 s" in message
    assert "MCPServer.stdio(..., connect_timeout=...)" in message
    with anyio.fail_after(GUARD), pytest.raises(MCPTimeout, match="connect_timeout"):
        async with server.connect():
            pass  # pragma: no cover
    # Both server processes were stopped: nothing is left waiting on a pipe.
    assert len(logs.started()) == 2
    assert not any(alive(pid) for pid in logs.started())


# The call limit is the SDK's request limit, the same on every backend: these run on asyncio
# only, to keep the suite's time (the start-up limit, interlock's own, runs on both).
one_backend = pytest.mark.parametrize("anyio_backend", ["asyncio"])
LIMIT = 1.5
"""The call limit of the tests whose server hangs on one tool: every other request of theirs
(the handshake, the tool listing, another call) must answer within it, on a loaded machine too."""


@one_backend
async def test_a_tool_that_never_answers_times_out_and_its_server_is_stopped(
    logs: Logs,
) -> None:
    server = stdio(logs, "--hang", call_timeout=LIMIT)
    with anyio.fail_after(GUARD), pytest.raises(MCPTimeout) as err:
        await server.call_tool("hang", {})
    error = err.value
    assert (error.phase, error.limit, error.server, error.code) == (
        "call",
        LIMIT,
        server.target,
        None,
    )
    assert f"did not answer within {LIMIT} s (call_timeout) while calling tool 'hang'" in str(error)
    assert "MCPServer.stdio(..., call_timeout=...)" in str(error)
    (pid,) = logs.started()
    assert not alive(pid)


@one_backend
async def test_an_agent_reads_a_timed_out_call_and_the_session_goes_on(logs: Logs) -> None:
    from _agents import replies_to_tool_results

    from interlock.agents import ScriptedModel, ToolAgent, ToolMessage, call

    server = stdio(logs, "--hang", call_timeout=LIMIT)
    script = replies_to_tool_results([call("hang", {}), call("echo", {"text": "after"})])
    async with server.connect():
        tools = await server.tools(include=["hang", "echo"])
        app = ToolAgent("waiter", ScriptedModel(script), tools).compile()
        with anyio.fail_after(GUARD):
            done = await app.run({"messages": ["wait for it"]}, thread="t")
        assert repr(server).endswith("connected>")  # a timed-out call leaves it usable
    hang, echo = [m for m in done.values["messages"] if isinstance(m, ToolMessage)]
    assert hang.status == "error" and "MCPTimeout" in hang.content
    assert f"{LIMIT} s (call_timeout) while calling tool 'hang'" in hang.content
    assert (echo.status, echo.content) == ("ok", '{"result":"after"}')
    assert len(logs.started()) == 1  # one server process for the block


def test_time_limits_are_checked() -> None:
    default = MCPServer.stdio("python", ["server.py"])
    assert (default.connect_timeout, default.call_timeout) == (60.0, 300.0)
    unlimited = MCPServer.http("http://127.0.0.1:9/mcp", connect_timeout=None, call_timeout=None)
    assert (unlimited.connect_timeout, unlimited.call_timeout) == (None, None)
    # Limits are not part of what the server is: equal servers share a connect() session.
    assert MCPServer.stdio("python", ["server.py"], call_timeout=5) == default
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="connect_timeout must be a positive number"):
            MCPServer.stdio("python", connect_timeout=bad)
    with pytest.raises(TypeError, match="call_timeout must be a number of seconds or None"):
        MCPServer.http("http://127.0.0.1:9/mcp", call_timeout="5")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="call_timeout"):
        MCPServer.stdio("python", call_timeout=True)


# -- streamable HTTP --------------------------------------------------------------------------


@dataclass
class HttpServer:
    url: str
    count: Path


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """The test server over streamable HTTP on a loopback port, for the module's tests."""
    count = tmp_path_factory.mktemp("mcp-http") / "count"
    env = {**os.environ, "MCP_TEST_COUNT": str(count)}
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", "--hang"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        yield HttpServer(url=f"http://127.0.0.1:{port}/mcp", count=count)
    finally:
        process.terminate()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


async def test_http_lists_and_calls_tools(http_server: HttpServer) -> None:
    server = MCPServer.http(http_server.url)
    assert server.transport == "http" and server.target == http_server.url
    tools = by_name(await server.tools(exclude=["crash", "hang"]))
    assert list(tools) == [t for t in TOOLS if t != "crash"]
    assert await run(tools["add"], a=20, b=22) == {"result": 42}
    before = len(_lines(http_server.count))
    await run(tools["count"])
    assert len(_lines(http_server.count)) == before + 1
    with pytest.raises(MCPToolFailed, match="the disk is on fire"):
        await run(tools["fail"])


async def test_http_sends_the_headers(http_server: HttpServer) -> None:
    server = MCPServer.http(http_server.url, headers={"X-Interlock-Test": "sesame"})
    assert await server.call_tool("header", {"name": "X-Interlock-Test"}) == {"result": "sesame"}
    async with server.connect():
        assert await server.call_tool("header", {"name": "x-interlock-test"}) == {
            "result": "sesame"
        }


async def test_http_connect_block(http_server: HttpServer) -> None:
    server = MCPServer.http(http_server.url)
    async with server.connect():
        add = by_name(await server.tools(include=["add"]))["add"]
        assert [await run(add, a=n, b=1) for n in range(3)] == [{"result": n + 1} for n in range(3)]


@one_backend
async def test_an_http_tool_that_never_answers_times_out(http_server: HttpServer) -> None:
    server = MCPServer.http(http_server.url, call_timeout=LIMIT)
    with anyio.fail_after(GUARD), pytest.raises(MCPTimeout) as err:
        await server.call_tool("hang", {})
    assert (err.value.phase, err.value.limit) == ("call", LIMIT)
    assert "MCPServer.http(..., call_timeout=...)" in str(err.value)
    # The server is still there for the next call.
    assert await server.call_tool("add", {"a": 1, "b": 2}) == {"result": 3}


@one_backend
async def test_an_http_endpoint_that_never_answers_times_out_connecting() -> None:
    with socket.socket() as sock:
        # It listens, so connections are made (the kernel queues them), but nothing ever reads
        # a request or writes a response.
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        server = MCPServer.http(url, connect_timeout=0.5)
        with anyio.fail_after(GUARD), pytest.raises(MCPTimeout) as err:
            await server.tools()
    assert (err.value.phase, err.value.limit, err.value.server) == ("connect", 0.5, url)
    assert "check that the URL is the server's MCP endpoint" in str(err.value)
    assert "MCPServer.http(..., connect_timeout=...)" in str(err.value)


async def test_an_unreachable_url_is_named() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Nothing listens on the port now that the socket is closed.
    url = f"http://user:secret@127.0.0.1:{port}/mcp"
    server = MCPServer.http(url)
    with pytest.raises(MCPError, match=f"cannot reach MCP server http://127.0.0.1:{port}/mcp"):
        await server.tools()
    assert "secret" not in server.target and "secret" not in repr(server)


# -- describing a server ----------------------------------------------------------------------


def test_a_server_description_is_checked() -> None:
    with pytest.raises(TypeError, match="args must be a sequence of str"):
        MCPServer.stdio("python", "server.py")
    with pytest.raises(ValueError, match="http:// or https:// URL"):
        MCPServer.http("127.0.0.1:8000/mcp")
    server = MCPServer.stdio("python", ["my server.py"], cwd=Path("/tmp"))
    assert server.target == "python 'my server.py'"
    assert repr(server) == "<MCPServer stdio \"python 'my server.py'\">"
    assert server != MCPServer.stdio("python", ["my server.py"])


# -- MCP tools inside an agent: the same policy, the same at-most-once rules -------------------


async def test_an_agent_gates_an_mcp_tool_and_runs_it_once(logs: Logs, tmp_path: Path) -> None:
    from _agents import replies_to_tool_results

    from interlock import SqliteStore
    from interlock.agents import ApprovalPolicy, Approve, ScriptedModel, ToolAgent, call

    server = stdio(logs)
    tools = await server.tools(include=["count", "add"])
    policy = ApprovalPolicy({"count": "require_approval", "add": "allow"})
    script = replies_to_tool_results(
        [call("count", {"label": "approved"}), call("add", {"a": 2, "b": 3})]
    )
    async with SqliteStore(tmp_path / "mcp.db") as store:
        app = ToolAgent("mcp", ScriptedModel(script), tools, policy=policy).compile(store=store)
        first = await app.run({"messages": ["count it"]}, thread="t")
        (question,) = first.interrupts
        assert question.info["tool"] == "count"
        assert question.info["schema"] == by_name(tools)["count"].parameters
        assert _lines(logs.count) == []  # nothing ran before the approval
        done = await app.resume("t", {question.id: Approve()})
        assert done.status == "done" and _lines(logs.count) == ["approved"]
        # The approved call was recorded as an effect: it ran once, and a record says so.
        effects = [e.kind for e in await store.audit_log(thread="t")]
        assert effects.count("effect_started") == 1 and effects.count("effect_done") == 1
