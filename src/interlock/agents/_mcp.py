"""Tools from MCP servers: each tool a server offers becomes an interlock `Tool`.

`MCPServer` says how to reach a server (a command to run over stdio, or a streamable-HTTP
URL); it holds no connection. `MCPServer.tools` lists the server's tools once, as `Tool`
objects whose ``parameters`` are the server's ``inputSchema``: `Tool.check` validates a model's
arguments against it, and they are passed on unchanged.

A run can stop for a person's decision and resume days later in another process, so a tool
never keeps a connection made earlier: by default each call opens a session, calls the tool
and closes it (a stdio server is started and stopped for the call). Inside
``async with server.connect():`` every call of that server's tools, from that task and the
tasks it starts, shares one live session instead.

Example::

    files = MCPServer.stdio("npx", ["-y", "@modelcontextprotocol/server-filesystem", "."])
    tools = await files.tools(include=["read_file", "list_directory"], idempotent=True)
    listing = await tools[1].fn(path=".")  # what the model would get back

    async with files.connect():  # one server process for everything in the block
        await app.run({"messages": [...]}, thread="thread-1")  # an agent offered `tools`

Every server has two time limits, so a server that never answers cannot hold a run forever:
``connect_timeout`` bounds starting it (or reaching it) and the protocol handshake, and
``call_timeout`` bounds each request (a tool call, the tool listing). Either one running out
raises `MCPTimeout`; the request is cancelled on the server, and a session opened for the
call is closed (a stdio server process is stopped, the SDK kills it if it will not exit).

A call's result is what the server answered: its ``structuredContent`` when it sent one, else
its text (several text parts joined by newlines), else its content blocks as JSON objects. A
result flagged ``isError`` raises `MCPToolFailed` with the server's message, which the agent
hands to the model; a server that cannot be started or reached, that crashes or breaks the
protocol raises `MCPError`, naming it.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

import anyio

from .._errors import InterlockError
from ._tools import _NAME, Tool

try:
    import httpx2
    from mcp import Client, StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError as ProtocolError
    from mcp.types import (
        CONNECTION_CLOSED,
        REQUEST_TIMEOUT,
        CallToolResult,
        ListToolsResult,
        TextContent,
    )
    from mcp.types import Tool as ListedTool
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "MCPServer needs the mcp package, version 2 or later: pip install 'interlock[mcp]'"
    ) from exc

__all__ = ["MCPError", "MCPServer", "MCPTimeout", "MCPToolFailed"]

_T = TypeVar("_T")

CONNECT_TIMEOUT: Final = 60.0
"""Default limit, in seconds, for starting a server and its handshake (``npx`` may download
the server first)."""
CALL_TIMEOUT: Final = 300.0
"""Default limit, in seconds, for one request (the MCP SDK's own HTTP read limit)."""

TimeoutPhase = Literal["connect", "call"]
"""What ran out of time: starting or reaching the server and the handshake, or one request."""


class MCPError(InterlockError):
    """Raised when an MCP server cannot be started or reached, crashes, or breaks the protocol.

    Attributes:
        server: The server's command line or URL.
        code: The JSON-RPC error code the server answered, if it answered one.
    """

    def __init__(self, message: str, *, server: str, code: int | None = None) -> None:
        super().__init__(message)
        self.server = server
        self.code = code


class MCPTimeout(MCPError):
    """Raised when an MCP server does not start or answer within its time limit.

    Attributes:
        phase: ``"connect"``: starting or reaching the server and the protocol handshake;
            ``"call"``: one request (a tool call, the tool listing).
        limit: The limit that ran out, in seconds (``connect_timeout`` or ``call_timeout``).
    """

    def __init__(self, message: str, *, server: str, phase: TimeoutPhase, limit: float) -> None:
        super().__init__(message, server=server)
        self.phase: TimeoutPhase = phase
        self.limit = limit


class MCPToolFailed(Exception):
    """Raised when an MCP tool answers with an error; the message is the server's.

    Attributes:
        tool: The tool's name.
        server: The server's command line or URL.
    """

    def __init__(self, message: str, *, tool: str, server: str) -> None:
        super().__init__(message)
        self.tool = tool
        self.server = server


@dataclass(frozen=True, kw_only=True)
class _Stdio:
    command: str
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...] | None
    cwd: str | None


@dataclass(frozen=True, kw_only=True)
class _Http:
    url: str
    headers: tuple[tuple[str, str], ...] | None


class _Live:
    """The session a ``connect()`` block holds open, and whether it still works."""

    __slots__ = ("broken", "client")

    def __init__(self, client: Client) -> None:
        self.client = client
        self.broken = False


# Invariant: holds only sessions whose ``connect()`` block is still open in this context; a
# block sets a new mapping on entry and resets it on exit, so child tasks see their parent's.
_live: ContextVar[Mapping[MCPServer, _Live] | None] = ContextVar("interlock_mcp_live", default=None)


class MCPServer:
    """How to reach an MCP server; build one with `MCPServer.stdio` or `MCPServer.http`.

    It holds no connection, so it (and the tools it makes) can be created anew in any process.
    Two servers described alike are equal, whatever their time limits, and share a
    ``connect()`` session (each call keeps its own server's ``call_timeout``).

    Attributes:
        transport: ``"stdio"`` or ``"http"``.
        target: The command line or URL, as errors name it.
        connect_timeout: Seconds allowed for starting or reaching the server and the handshake
            (None: no limit).
        call_timeout: Seconds allowed for each request (None: no limit).
    """

    __slots__ = ("_spec", "call_timeout", "connect_timeout", "target", "transport")

    def __init__(
        self,
        spec: _Stdio | _Http,
        *,
        connect_timeout: float | None = CONNECT_TIMEOUT,
        call_timeout: float | None = CALL_TIMEOUT,
    ) -> None:
        self._spec = spec
        self.connect_timeout = _limit(connect_timeout, "connect_timeout")
        self.call_timeout = _limit(call_timeout, "call_timeout")
        self.transport: Literal["stdio", "http"]
        if isinstance(spec, _Stdio):
            self.transport = "stdio"
            self.target = shlex.join([spec.command, *spec.args])
        else:
            self.transport = "http"
            self.target = _without_userinfo(spec.url)

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        connect_timeout: float | None = CONNECT_TIMEOUT,
        call_timeout: float | None = CALL_TIMEOUT,
    ) -> MCPServer:
        """A server run as a subprocess, spoken to over its stdin and stdout.

        Args:
            command: The executable (looked up on ``PATH``).
            args: Its arguments.
            env: Variables for the server, on top of the few it inherits (``PATH``, ``HOME``,
                ``USER``, ``SHELL``, ``TERM``, ``LOGNAME``): the rest of this process's
                environment is not passed on.
            cwd: Its working directory (default: this process's).
            connect_timeout: Seconds allowed for the process to start and finish the
                handshake (None: no limit); past it, `MCPTimeout` and the process is stopped.
            call_timeout: Seconds allowed for each request (None: no limit); past it, the
                request is cancelled and `MCPTimeout` raised.
        """
        if not isinstance(command, str) or not command:
            raise TypeError("MCPServer.stdio needs the command to run, as a non-empty str")
        if isinstance(args, str):
            raise TypeError(
                f"args must be a sequence of str, not a str; write args=[{args!r}] or split it "
                "with shlex.split"
            )
        return cls(
            _Stdio(
                command=command,
                args=tuple(str(a) for a in args),
                env=None if env is None else tuple(sorted(env.items())),
                cwd=None if cwd is None else str(cwd),
            ),
            connect_timeout=connect_timeout,
            call_timeout=call_timeout,
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        connect_timeout: float | None = CONNECT_TIMEOUT,
        call_timeout: float | None = CALL_TIMEOUT,
    ) -> MCPServer:
        """A server reached over streamable HTTP.

        Args:
            url: Its MCP endpoint, such as ``http://127.0.0.1:8000/mcp``.
            headers: Sent with every request (an ``Authorization`` header, for instance).
            connect_timeout: Seconds allowed for reaching the server and the handshake (None:
                no limit); past it, `MCPTimeout`.
            call_timeout: Seconds allowed for each request (None: no limit); past it, the
                request is cancelled and `MCPTimeout` raised.
        """
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"MCPServer.http needs an http:// or https:// URL, not {url!r}")
        return cls(
            _Http(url=url, headers=None if headers is None else tuple(headers.items())),
            connect_timeout=connect_timeout,
            call_timeout=call_timeout,
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MCPServer) and self._spec == other._spec

    def __hash__(self) -> int:
        return hash(self._spec)

    def __repr__(self) -> str:
        live = (_live.get() or {}).get(self)
        state = "" if live is None else " broken" if live.broken else " connected"
        return f"<MCPServer {self.transport} {self.target!r}{state}>"

    # -- public API ---------------------------------------------------------------------------

    async def tools(
        self,
        *,
        include: Collection[str] | None = None,
        exclude: Collection[str] | None = None,
        dangerous: bool | Mapping[str, bool] | None = None,
        idempotent: bool | Mapping[str, bool] = False,
    ) -> list[Tool]:
        """Ask the server for its tools and make each a `Tool`.

        Args:
            include: Only these tools (each must be offered by the server). None: all.
            exclude: Leave these out (names the server does not offer are ignored). It wins
                over ``include``.
            dangerous: For every tool (see `Tool`), or a mapping of tool name to flag; a tool
                the mapping does not name gets None (dangerous when the policy makes its calls
                wait for approval).
            idempotent: For every tool, or a mapping of tool name to flag (unnamed: False).

        Returns:
            The tools, in the server's order.

        Raises:
            MCPTimeout: The server did not start or answer within its limits.
            MCPError: The server cannot be reached; it offers no tool by a name that
                ``include``, ``dangerous`` or ``idempotent`` gives; or one of the tools to
                return has a name or input schema a `Tool` cannot take.
            ValueError: A tool would be both dangerous and idempotent.
        """
        wanted = None if include is None else _names(include, "include")
        unwanted = _names(exclude or (), "exclude")
        listed = await self._request(_list_tools, doing="listing its tools")
        offered = [t.name for t in listed]
        for what, names in (
            ("include", wanted or ()),
            ("dangerous", dangerous if isinstance(dangerous, Mapping) else ()),
            ("idempotent", idempotent if isinstance(idempotent, Mapping) else ()),
        ):
            unknown = sorted(set(names) - set(offered))
            if unknown:
                named = ", ".join(map(repr, unknown))
                raise MCPError(
                    f"MCP server {self.target} offers no tool named {named} (given in {what}=); "
                    f"it offers {', '.join(offered) or 'no tools'}",
                    server=self.target,
                )
        tools: list[Tool] = []
        for t in listed:
            if (wanted is not None and t.name not in wanted) or t.name in unwanted:
                continue
            danger = dangerous.get(t.name) if isinstance(dangerous, Mapping) else dangerous
            safe = idempotent.get(t.name, False) if isinstance(idempotent, Mapping) else idempotent
            if danger and safe:
                raise ValueError(
                    f"tool {t.name!r} cannot be both dangerous and idempotent; leave it out of "
                    "one of dangerous= and idempotent= (a mapping sets them tool by tool)"
                )
            tools.append(self._tool(t, dangerous=danger, idempotent=safe))
        return tools

    async def call_tool(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """Call one of the server's tools; what its tools' functions do.

        Args:
            name: The tool's name on the server.
            arguments: Its arguments, as the server's input schema describes them.

        Returns:
            The structured content of the answer if it has one, else its text (parts joined
            by newlines), else its content blocks as JSON objects.

        Raises:
            MCPToolFailed: The tool answered with an error.
            MCPTimeout: The server did not start, or the tool did not answer, within the
                server's limits (the call is cancelled on the server).
            MCPError: The server cannot be reached, crashed, or broke the protocol.
        """
        limit = self.call_timeout
        result = await self._request(
            lambda client: client.call_tool(name, dict(arguments), read_timeout_seconds=limit),
            doing=f"calling tool {name!r}",
        )
        return _value(result, tool=name, server=self.target)

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[MCPServer]:
        """Keep one session open for every call of this server's tools inside the block.

        It covers the task that enters the block and the tasks it starts, and it must be left
        by the task that entered it. Inside an open block of an equal server, it reuses that
        session. If the session breaks (the server crashed), later calls in the block each
        open their own.

        Yields:
            This server.

        Raises:
            MCPTimeout: The server did not start or finish its handshake within
                ``connect_timeout``.
            MCPError: The server cannot be started or reached, or failed while it closed.
        """
        current = _live.get() or {}
        if self in current:
            yield self
            return
        failure: Exception | None = None
        opened = False
        try:
            async with self._session() as client:
                opened = True
                token = _live.set({**current, self: _Live(client)})
                try:
                    yield self
                except Exception as exc:
                    # Raised again once the session is closed, so it comes out as it was rather
                    # than wrapped in the exception groups of the SDK's task groups.
                    failure = exc
                finally:
                    _live.reset(token)
        except MCPTimeout:
            raise
        except Exception as exc:
            error = self._error(exc, "closing its session" if opened else "opening a session")
            error.__context__ = failure
            raise error from exc
        if failure is not None:
            raise failure

    # -- internals ----------------------------------------------------------------------------

    def _tool(self, listed: ListedTool, *, dangerous: bool | None, idempotent: bool) -> Tool:
        name = listed.name
        if not _NAME.match(name):
            raise MCPError(
                f"MCP server {self.target} offers a tool named {name!r}, which is not a valid "
                "tool name (1 to 64 letters, digits, '_' or '-'); leave it out with "
                f"exclude=[{name!r}]",
                server=self.target,
            )

        async def call(**arguments: Any) -> Any:
            return await self.call_tool(name, arguments)

        call.__name__ = call.__qualname__ = name
        try:
            return Tool(
                name,
                listed.description or listed.title or "",
                listed.input_schema,
                call,
                dangerous=dangerous,
                idempotent=idempotent,
            )
        except ValueError as exc:
            raise MCPError(
                f"MCP server {self.target} offers tool {name!r}, which cannot be used: {exc}; "
                f"leave it out with exclude=[{name!r}]",
                server=self.target,
            ) from exc

    async def _request(self, send: Callable[[Client], Awaitable[_T]], *, doing: str) -> _T:
        """Send one request on the live session if there is one, else on a session of its own."""
        live = (_live.get() or {}).get(self)
        if live is not None and not live.broken:
            try:
                return await send(live.client)
            except Exception as exc:
                # Only a JSON-RPC error answer leaves the session usable; so does a request
                # that timed out, which the SDK cancelled on the server.
                live.broken = not (isinstance(exc, ProtocolError) and exc.code != CONNECTION_CLOSED)
                raise self._error(exc, doing) from exc
        try:
            async with self._session() as client:
                return await send(client)
        except MCPTimeout:
            raise
        except Exception as exc:
            raise self._error(exc, doing) from exc

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[Client]:
        """A session, open and past its handshake within ``connect_timeout``.

        Raises:
            MCPTimeout: The server did not start or finish the handshake in time (what was
                started is closed first).
        """
        limit = self.connect_timeout
        # A deadline on the way in, lifted once the handshake is done. When it cancels the
        # start, the SDK closes what it started (it stops a stdio process, killing it if it
        # will not exit).
        with anyio.CancelScope(
            deadline=math.inf if limit is None else anyio.current_time() + limit
        ) as scope:
            async with self._client() as client:
                scope.deadline = math.inf
                yield client
        if scope.cancelled_caught:
            raise self._timeout("connect")

    @asynccontextmanager
    async def _client(self) -> AsyncIterator[Client]:
        """The SDK's client for this server, entered (connected, past the handshake)."""
        spec = self._spec
        # Every request's own limit, unless the request gives one (a tool call gives its
        # server's: a connect() session may be shared by servers with other limits).
        read = self.call_timeout
        if isinstance(spec, _Stdio):
            parameters = StdioServerParameters(
                command=spec.command,
                args=list(spec.args),
                env=None if spec.env is None else dict(spec.env),
                cwd=spec.cwd,
            )
            async with Client(parameters, cache=None, read_timeout_seconds=read) as client:
                yield client
            return
        headers = None if spec.headers is None else dict(spec.headers)
        # The SDK's HTTP limits (a response stream may stay open for long), stretched to the
        # call limit: the request's own limit should be the one that runs out.
        reading = None if read is None else max(read, 300.0)
        timeout = httpx2.Timeout(30.0, read=reading)
        async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http:
            transport = streamable_http_client(spec.url, http_client=http)
            async with Client(transport, cache=None, read_timeout_seconds=read) as client:
                yield client

    def _timeout(self, phase: TimeoutPhase, doing: str = "") -> MCPTimeout:
        """The error for a limit that ran out in ``phase``, while ``doing`` something."""
        where = f"MCP server {self.target}"
        if phase == "connect":
            limit = self.connect_timeout
            assert limit is not None
            if self.transport == "stdio":
                check = (
                    "check that the command starts an MCP server speaking on its stdout (its "
                    "stderr may say why it did not)"
                )
            else:
                check = "check that the URL is the server's MCP endpoint and that it responds"
            message = (
                f"{where} did not finish starting within {limit:g} s (connect_timeout): it "
                f"never answered the handshake; {check}, or give it longer with "
                f"MCPServer.{self.transport}(..., connect_timeout=...)"
            )
        else:
            limit = self.call_timeout
            assert limit is not None
            message = (
                f"{where} did not answer within {limit:g} s (call_timeout) while {doing}; the "
                "request was cancelled. Check that the server is not stuck, or give its tools "
                f"longer with MCPServer.{self.transport}(..., call_timeout=...)"
            )
        return MCPTimeout(message, server=self.target, phase=phase, limit=limit)

    def _error(self, exc: BaseException, doing: str) -> MCPError:
        """Translate what the SDK raised while ``doing`` something into an `MCPError`."""
        leaf = _first_leaf(exc)
        where = f"MCP server {self.target}"
        code: int | None = None
        if isinstance(leaf, ProtocolError) and leaf.code == REQUEST_TIMEOUT:
            if self.call_timeout is not None:
                return self._timeout("call", doing)
            code = leaf.code
            message = f"{where} answered that it timed out while {doing}: {leaf.message}"
        elif isinstance(leaf, ProtocolError) and leaf.code == CONNECTION_CLOSED:
            message = (
                f"{where} closed the connection while {doing}: it exited or crashed (its "
                "stderr may say why)"
            )
        elif isinstance(leaf, ProtocolError):
            code = leaf.code
            message = f"{where} answered an error while {doing}: {leaf.message} (code {code})"
        elif isinstance(leaf, OSError) and self.transport == "stdio" and leaf.errno is not None:
            message = (
                f"cannot start {where}: {leaf.strerror}; check the command, its working "
                "directory and PATH"
            )
        elif isinstance(leaf, httpx2.TransportError):
            message = (
                f"cannot reach {where} while {doing} ({type(leaf).__name__}: {leaf}); check that "
                "it runs and that the URL is right"
            )
        else:
            message = f"{where} failed while {doing}: {type(leaf).__name__}: {leaf}"
        return MCPError(message, server=self.target, code=code)


async def _list_tools(client: Client) -> list[ListedTool]:
    """Every tool the server lists, page by page."""
    found: list[ListedTool] = []
    cursor: str | None = None
    seen: set[str] = set()
    while True:
        page: ListToolsResult = await client.list_tools(cursor=cursor)
        found.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None or cursor in seen:
            return found
        seen.add(cursor)


def _value(result: CallToolResult, *, tool: str, server: str) -> Any:
    """What a tool's function returns for the server's answer (see the module docstring)."""
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    if result.is_error:
        raise MCPToolFailed(
            "\n".join(texts) or f"tool {tool} failed without saying why", tool=tool, server=server
        )
    if result.structured_content is not None:
        return result.structured_content
    if len(texts) == len(result.content):
        return "\n".join(texts)
    return [
        block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content
    ]


def _limit(value: float | None, what: str) -> float | None:
    """A time limit, checked: a positive number of seconds, or None for none."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what} must be a number of seconds or None, not {type(value).__name__}")
    if not 0 < value < math.inf:
        raise ValueError(f"{what} must be a positive number of seconds (or None), not {value!r}")
    return float(value)


def _names(names: Collection[str], what: str) -> frozenset[str]:
    if isinstance(names, str) or not all(isinstance(n, str) for n in names):
        raise TypeError(f"{what} must be a collection of tool names, such as {what}=['search']")
    return frozenset(names)


def _first_leaf(exc: BaseException) -> BaseException:
    """The first exception inside (nested) exception groups; the SDK's task groups add them."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _without_userinfo(url: str) -> str:
    """The URL with any ``user:password@`` taken out, fit for error messages."""
    scheme, sep, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    return f"{scheme}{sep}{authority.rpartition('@')[2]}{slash}{path}"
