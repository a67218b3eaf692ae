"""An ASGI application under uvicorn in a thread of its own, on a free loopback port.

The application is built in the server's thread (``factory()``), so the stores it opens belong
to that thread's event loop; ``stores_of(app)`` names them, and they are closed there when
the server stops.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import anyio
import uvicorn
from starlette.types import ASGIApp


@contextmanager
def uvicorn_thread(
    factory: Callable[[], ASGIApp], stores_of: Callable[[Any], Sequence[Any]]
) -> Iterator[tuple[str, uvicorn.Server]]:
    """Serve ``factory()`` until the block ends; yields its URL and the server."""
    holder: dict[str, Any] = {}
    ready = threading.Event()

    def run() -> None:
        try:
            config = uvicorn.Config(
                factory(),
                host="127.0.0.1",
                port=0,
                log_level="warning",
                lifespan="on",
                timeout_graceful_shutdown=1,
            )
            server = uvicorn.Server(config)
            holder["server"] = server
        except BaseException as exc:
            holder["error"] = exc
            ready.set()
            raise
        ready.set()
        try:
            server.run()
        finally:
            # The served apps' stores were opened here, by the factory: close them here.
            for store in stores_of(config.app):
                anyio.run(store.close)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    ready.wait(10)
    if "error" in holder:
        raise holder["error"]
    server: uvicorn.Server = holder["server"]
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", server
    finally:
        server.should_exit = True
        thread.join(15)
