"""``interlock worker``: run an app's threads as jobs, one of many worker processes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import click

from ..runtime import App
from ._load import APP_VARIABLE, STORE_VARIABLE, _find, open_target
from ._output import Refused
from ._startup import check_free, refusal

__all__ = ["worker"]


@click.command()
@click.option(
    "--app",
    "app_spec",
    envvar=APP_VARIABLE,
    metavar="MODULE:ATTR",
    required=True,
    help=f"Your app (an App, or the Workers made from it), as module:attribute "
    f"(env {APP_VARIABLE}).",
)
@click.option(
    "--store",
    "store_url",
    envvar=STORE_VARIABLE,
    metavar="URL",
    help=f"Override the app's store: a postgresql:// URL (env {STORE_VARIABLE}).",
)
@click.option("--queue", default="interlock", show_default=True, help="The jobs' queue.")
@click.option(
    "--concurrency", default=10, show_default=True, type=click.IntRange(1), help="Jobs at once."
)
@click.option(
    "--grace",
    default=10.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds a stopping worker lets running tasks finish before cancelling them.",
)
@click.option(
    "--expire-after",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Delete finished threads untouched this long.",
)
@click.option("--name", help="The worker's name in procrastinate's logs and tables.")
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    help="Serve Prometheus metrics at http://HOST:PORT/metrics.",
)
@click.option(
    "--metrics-host", default="127.0.0.1", show_default=True, help="The metrics' address."
)
@click.option("-v", "--verbose", is_flag=True, help="Log each job (INFO) to stderr.")
def worker(
    app_spec: str,
    store_url: str | None,
    queue: str,
    concurrency: int,
    grace: float,
    expire_after: float | None,
    name: str | None,
    metrics_port: int | None,
    metrics_host: str,
    verbose: bool,
) -> None:
    """Run your app's threads as jobs from its PostgreSQL database, until SIGTERM or Ctrl-C.

    Start as many as you like, on as many machines as reach the database. A stopping worker
    pauses its threads and queues them for the others. With --app naming a Workers object,
    its settings are used and the options above are ignored.

    \b
    Examples:
      interlock worker --app shop.approvals:app --concurrency 20
    """
    try:
        from ..workers import Workers
    except ImportError as exc:
        raise Refused(
            f"workers need the worker extra ({exc.name} is missing): "
            "pip install 'interlock[worker]', or in a clone of interlock: pip install '.[worker]'"
        ) from exc
    ctx = click.get_current_context()
    found: Any = None if store_url else _find(app_spec, ctx)
    if isinstance(found, Workers):
        workers = found
    else:
        target = open_target(app_spec, store_url, decides=True, new_ok=True)
        assert isinstance(target.app, App)
        try:
            workers = Workers(
                target.app,
                queue=queue,
                concurrency=concurrency,
                grace=grace,
                expire_after=expire_after,
            )
        except (TypeError, ValueError) as exc:
            raise Refused(str(exc)) from exc
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    banner = (
        f"interlock: worker for {workers.app.plan.name!r} on queue {workers.queue!r} "
        f"(concurrency {workers.concurrency}); SIGTERM or Ctrl-C stops it, giving its threads back"
    )
    try:
        with contextlib.suppress(KeyboardInterrupt):  # a signal before the handlers are in place
            asyncio.run(_run(workers, name, metrics_host, metrics_port, banner))
    except Exception as exc:  # an interlock error, maybe in a group: one line; else a bug
        refused = refusal(exc)
        if refused is None:
            raise
        raise refused from exc
    click.echo("interlock: worker stopped", err=True)


async def _run(workers: Any, name: str | None, host: str, port: int | None, banner: str) -> None:
    try:
        # Reach the database and take the metrics' port before saying the worker works: a
        # database that is down or a port that is taken is one line, not a banner and then a
        # traceback.
        await workers.install()
        if port is not None:
            check_free(host, port, option="--metrics-port")
        click.echo(banner, err=True)
        await workers.run(name=name, metrics_host=host, metrics_port=port)
    finally:
        await workers.app.store.close()
