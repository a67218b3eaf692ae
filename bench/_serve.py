"""The approval server on a free loopback port, for the benchmarks that measure it over HTTP."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any


@contextlib.asynccontextmanager
async def serving(asgi: Any) -> AsyncIterator[str]:
    """Serve ``asgi`` with uvicorn in this event loop; yield its base URL, stop it after."""
    import uvicorn

    config = uvicorn.Config(asgi, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 (uvicorn offers no event to wait on)
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
