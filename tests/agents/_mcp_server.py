"""A small MCP server the MCP tests start as a real process.

``python tests/agents/_mcp_server.py`` serves over stdio. ``--http`` serves streamable HTTP on
an ephemeral loopback port instead, and prints the port on its first line of stdout once it
accepts connections. ``--dotted`` also offers a tool whose name interlock cannot take, and
``--hang`` a tool that never answers (until the client cancels the call).

Environment:
    MCP_TEST_PIDS: A file the server appends its pid to when it starts (one line a process).
    MCP_TEST_COUNT: A file `count` appends a line to each time its body runs.
"""

from __future__ import annotations

import os
import socket
import sys

import anyio
import uvicorn
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("interlock-test", log_level="WARNING")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return text


@server.tool(structured_output=False)
def shout(text: str, times: int = 1) -> list[str]:
    """Say the text back in capitals, once per line."""
    return [text.upper()] * times


@server.tool(structured_output=False)
def picture(caption: str) -> list[str | Image]:
    """A caption and a (tiny, not really PNG) image."""
    return [caption, Image(data=b"not really a png", format="png")]


@server.tool()
def fail() -> str:
    """Always fail."""
    raise ToolError("the disk is on fire")


@server.tool()
def count(label: str = "") -> str:
    """Append a line to the count file and say how many lines it has."""
    path = os.environ["MCP_TEST_COUNT"]
    with open(path, "a") as f:
        f.write(f"{label}\n")
    with open(path) as f:
        return str(len(f.readlines()))


@server.tool()
def crash() -> str:
    """Exit the server process without answering."""
    os._exit(3)


@server.tool()
def header(name: str, ctx: Context) -> str:
    """The value of an HTTP request header ("" over stdio or when absent)."""
    return (ctx.headers or {}).get(name.lower(), "")


def _offer_dotted() -> None:
    @server.tool(name="dotted.name")
    def dotted() -> str:
        """A tool whose name has a dot."""
        return "."


def _offer_hang() -> None:
    @server.tool()
    async def hang() -> str:
        """Never answer: wait until the call is cancelled."""
        await anyio.sleep_forever()
        return "never"


async def _serve_http() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    # Connections queue on the listening socket from here on, so the port is ready to use.
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    await uvicorn.Server(config).serve(sockets=[sock])


def main(argv: list[str]) -> None:
    pids = os.environ.get("MCP_TEST_PIDS")
    if pids:
        with open(pids, "a") as f:
            f.write(f"{os.getpid()}\n")
    if "--dotted" in argv:
        _offer_dotted()
    if "--hang" in argv:
        _offer_hang()
    if "--http" in argv:
        anyio.run(_serve_http)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main(sys.argv[1:])
