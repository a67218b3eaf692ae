"""Running the approval server under uvicorn: banner once listening, start-up failures kept.

Imported only by ``interlock serve``, after it checked that the server extra is installed.
"""

from __future__ import annotations

import logging
import socket

import click
import uvicorn

from ._startup import Startup

__all__ = ["run_server"]


def run_server(api: Startup, sock: socket.socket, banner: str) -> bool:
    """Serve ``api`` on ``sock`` until stopped; return whether it ever listened.

    ``banner`` is printed once the server listens. If the app's start-up fails, nothing is
    printed and the failure is left in ``api.error``.
    """
    # The peer is the TCP peer: a proxy's X-Forwarded-For is not taken for the client, so a
    # trusted proxy on this machine is known by its address and nobody can claim to be it.
    config = uvicorn.Config(api, log_level="info", timeout_graceful_shutdown=5, proxy_headers=False)
    log = logging.getLogger("uvicorn.error")
    log.addFilter(api.log_filter)
    server = _Server(config, api, banner)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn stopped cleanly, then raised the signal it caught
        pass
    except SystemExit:  # uvicorn's exit when the app's start-up failed
        if server.started:
            raise
    finally:
        log.removeFilter(api.log_filter)
    return bool(server.started)


class _Server(uvicorn.Server):
    """uvicorn's server, which prints the command's banner once it listens."""

    def __init__(self, config: uvicorn.Config, app: Startup, banner: str) -> None:
        super().__init__(config)
        self._app = app
        self._banner = banner

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and not self.should_exit:
            self._app.serving = True
            click.echo(self._banner)
