"""A lean HTTP/1.1 client for the H1 round trips: one keep-alive connection, standard library only.

Why: on a small virtual machine an ``httpx`` request costs the client ~0.6 ms of its own
(``GET /healthz`` of the approval server: 0.07 ms over a plain socket, 0.65–0.78 ms through
``httpx`` or ``httpx2``), more than the approval server spends answering it. H1 measures
servers, so both sides' clients are this one by default (``--client lean``); ``--client httpx``
gives the figures with httpx, for both sides alike.

It speaks just what the two servers answer: ``Content-Length`` and ``chunked`` bodies (the
Agent Server's ``runs/wait`` streams its answer), keep-alive, ``Connection: close``. JSON is
encoded with the standard library's ``json`` on both sides. The interface is the part of
``httpx.AsyncClient`` the H1 clients use::

    async with LeanClient("http://127.0.0.1:8000", timeout=30) as client:
        r = await client.post("/v1/threads/t1/runs", json={"input": {}}, headers={...})
        r.raise_for_status().json()
"""

from __future__ import annotations

import asyncio
import contextlib
import json as jsonlib
import socket
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

__all__ = ["LeanClient", "LeanError", "LeanResponse"]


class LeanError(RuntimeError):
    """An answer this client cannot read, or an error status (`LeanResponse.raise_for_status`)."""


class LeanResponse:
    """A status, headers (lower-case names) and the whole body."""

    def __init__(self, status_code: int, headers: dict[str, str], content: bytes) -> None:
        self.status_code = status_code
        self.headers = headers
        self.content = content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return jsonlib.loads(self.content)

    def raise_for_status(self) -> LeanResponse:
        if self.status_code >= 400:
            raise LeanError(f"HTTP {self.status_code}: {self.text[:500]}")
        return self


class LeanClient:
    """One keep-alive HTTP/1.1 connection to ``base_url``, opened on first use."""

    def __init__(self, base_url: str, *, timeout: float | None = 30.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"LeanClient speaks plain http to a host, not {base_url!r}")
        self._host = parts.hostname
        self._port = parts.port or 80
        self._prefix = parts.path.rstrip("/")
        self._authority = f"{self._host}:{self._port}".encode()
        self._timeout = timeout
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def __aenter__(self) -> LeanClient:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def get(self, path: str, *, headers: dict[str, str] | None = None) -> LeanResponse:
        return await self.request("GET", path, headers=headers)

    async def post(
        self, path: str, *, json: Any = None, headers: dict[str, str] | None = None
    ) -> LeanResponse:
        return await self.request("POST", path, json=json, headers=headers)

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        headers: dict[str, str] | None = None,
    ) -> LeanResponse:
        body = b"" if json is None else jsonlib.dumps(json).encode()
        lines = [f"{method} {self._prefix}{path} HTTP/1.1".encode(), b"Host: " + self._authority]
        if json is not None:
            lines.append(b"Content-Type: application/json")
        if body or method == "POST":
            lines.append(b"Content-Length: %d" % len(body))
        for name, value in (headers or {}).items():
            lines.append(f"{name}: {value}".encode())
        head = b"\r\n".join(lines) + b"\r\n\r\n"
        exchange = self._exchange(head + body)
        if self._timeout is None:
            return await exchange
        return await asyncio.wait_for(exchange, self._timeout)

    async def _exchange(self, request: bytes) -> LeanResponse:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self._host, self._port)
            sock = self._writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader, writer = self._reader, self._writer
        assert reader is not None
        writer.write(request)
        try:
            response = await self._read(reader)
        except BaseException:
            await self.aclose()
            raise
        if response.headers.get("connection", "").lower() == "close":
            await self.aclose()
        return response

    async def _read(self, reader: asyncio.StreamReader) -> LeanResponse:
        head = await reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head[:-4].decode("latin-1").split("\r\n")
        try:
            status = int(status_line.split(" ", 2)[1])
        except (IndexError, ValueError):
            raise LeanError(f"not an HTTP status line: {status_line!r}") from None
        headers: dict[str, str] = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            chunks = []
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
                        pass
                    break
                chunks.append((await reader.readexactly(size + 2))[:-2])
            content = b"".join(chunks)
        elif "content-length" in headers:
            content = await reader.readexactly(int(headers["content-length"]))
        elif status in (204, 304) or 100 <= status < 200:
            content = b""
        else:
            content = await reader.read()
            headers["connection"] = "close"
        return LeanResponse(status, headers, content)
