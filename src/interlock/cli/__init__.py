"""The ``interlock`` command line: the approvers' side of durable human-in-the-loop runs.

Each area is a module of its own: finding the app and its store (`_load`), the inbox and one
question (`_inbox`), decisions (`_decide`), a thread's record and moving it on (`_threads`),
forking a thread (`_fork`), the audit log (`_audit`), the approval server (`_serve`), its
principals and tokens (`_identities`), workers (`_worker`), the graph's picture (`_graph`) and
the demo (`_demo`).
A new command is a click command in a module of its own, added to `COMMANDS`.
"""

from __future__ import annotations

from typing import Final

import click

from ._audit import audit
from ._decide import answer, approve, edit, reject, respond
from ._demo import demo
from ._fork import fork
from ._graph import graph
from ._identities import principal, token
from ._inbox import inbox, show
from ._serve import serve
from ._threads import history, pause, resume, sweep, threads
from ._worker import worker

__all__ = ["COMMANDS", "cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="interlock")
def cli() -> None:
    """interlock: agent runs that stop for a person's decision and resume exactly.

    Name your app as module:attribute with --app (or INTERLOCK_APP), and where its threads
    are with --store URL (or INTERLOCK_STORE): sqlite:///path.db, sqlite:////abs/path.db or
    postgresql://user@host:port/db. Reading (inbox, show, threads, history, audit verify) and pause
    need only the store; deciding, continuing and forking need the app; graph needs only the app.

    \b
    Exit codes:
      0  done
      1  refused, conflict or not found (a refused decision records nothing)
      2  usage error (a missing or wrong option)
    """


COMMANDS: Final[tuple[click.Command, ...]] = (
    inbox,
    show,
    approve,
    reject,
    edit,
    respond,
    answer,
    resume,
    fork,
    threads,
    history,
    pause,
    sweep,
    audit,
    serve,
    principal,
    token,
    worker,
    graph,
    demo,
)
"""The commands of the group, in the order its help lists them."""

for command in COMMANDS:
    cli.add_command(command)


def main() -> None:
    """Entry point of the ``interlock`` script."""
    cli()
