"""``interlock fork``: copy a thread at a checkpoint into a new thread, maybe edited, maybe run.

Who forks is ``--actor`` (or the user this process runs as). When the store has a principal of
that name, it must be enabled and an admin: the runtime checks the role where the fork is
recorded, as it does for a fork over HTTP. A name the store does not know is the operator of
the machine, who holds the store's URL already, and may fork.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

import click
from rich.markup import escape

from .._errors import (
    CheckpointNotFound,
    GraphDefinitionError,
    InvalidResume,
    InvalidStateEdit,
    NotAuthorized,
)
from ..runtime import RunResult
from ._decide import actor_name, store_principal
from ._load import open_target, target_options
from ._output import Refused, echo_json, out_console, run
from ._views import again, print_outcome

__all__ = ["fork"]


@dataclass(frozen=True, kw_only=True)
class _Forked:
    """What the command did."""

    checkpoint_id: str
    """The new thread's first checkpoint."""
    result: RunResult[Any] | None
    """How the new thread's run ended, with ``--run``."""


@click.command()
@click.argument("thread")
@click.option(
    "--at", "checkpoint", required=True, metavar="CHECKPOINT", help="The checkpoint to fork from."
)
@click.option(
    "--to",
    "new_thread",
    metavar="NEW_THREAD",
    help="The new thread's id (default: THREAD-fork- and 6 random hex digits).",
)
@click.option(
    "--update",
    "update_json",
    metavar="JSON",
    help="State keys whose whole values the new thread replaces, a JSON object checked "
    "against the state's schema.",
)
@click.option(
    "--as-node",
    metavar="NODE",
    help="Plan the new thread as if NODE had just run (its successors next).",
)
@click.option("--run", "run_it", is_flag=True, help="Continue the new thread right away.")
@click.option(
    "--actor",
    metavar="NAME",
    help="Who forks, for the record (default: your user name on this machine).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead.")
@target_options
def fork(
    thread: str,
    checkpoint: str,
    new_thread: str | None,
    update_json: str | None,
    as_node: str | None,
    run_it: bool,
    actor: str | None,
    as_json: bool,
    app_spec: str | None,
    store_url: str | None,
) -> None:
    """Fork THREAD at a checkpoint into a new thread, maybe with its state edited.

    The new thread starts from the checkpoint's state (`interlock history THREAD` lists the
    checkpoints), with --update's keys replaced, planned as if --as-node had just run; THREAD
    itself is not changed. Both threads' audit logs record the fork and who made it. A
    principal of the store forks only if it is an admin. Quote the JSON for the shell:
    --update '{"amount": 120}'.
    """
    values = _values(update_json)
    to = new_thread or f"{thread}-fork-{secrets.token_hex(3)}"
    target = open_target(app_spec, store_url, decides=True)
    app = target.app
    assert app is not None  # decides=True: open_target refused the command without one
    who = actor_name(actor)

    async def go() -> _Forked:
        try:
            principal = await store_principal(target.store, who, undone="written")
            forked = await app.fork(
                thread,
                checkpoint,
                to,
                values=values,
                as_node=as_node,
                actor=who,
                principal=principal,
            )
            result = await app.resume(to, actor=who) if run_it else None
            return _Forked(checkpoint_id=forked, result=result)
        except (InvalidStateEdit, NotAuthorized, GraphDefinitionError) as exc:
            raise Refused(f"{exc}. Nothing was written") from exc
        except CheckpointNotFound as exc:
            raise Refused(f"{exc}: {again('history', thread)} lists them") from exc
        except InvalidResume as exc:
            # Forked; the new thread waits on questions copied with it, not on this command.
            raise Refused(
                f"thread {to!r} was forked, and waits on questions nobody has answered yet "
                f"({exc}). List them with {again('inbox', '--thread', to)}"
            ) from exc
        finally:
            await target.aclose()

    forked = run(go)
    if as_json:
        echo_json(
            {
                "thread": to,
                "checkpoint_id": forked.checkpoint_id,
                "source_thread": thread,
                "source_checkpoint": checkpoint,
                "as_node": as_node,
                "edited": list(values or ()),
                "run": None
                if forked.result is None
                else {
                    "status": forked.result.status,
                    "checkpoint_id": forked.result.checkpoint_id,
                    "interrupts": [i.id for i in forked.result.interrupts],
                },
            }
        )
        return
    out = out_console()
    edited = f", with {', '.join(values)} replaced" if values else ""
    out.print(
        f"Forked thread {escape(thread)} at {escape(checkpoint)} into [bold]{escape(to)}"
        f"[/bold]{escape(edited)} (checkpoint {forked.checkpoint_id})."
    )
    if forked.result is not None:
        print_outcome(out, forked.result)
    else:
        out.print(f"Continue it with: {escape(again('resume', to))}")


def _values(text: str | None) -> dict[str, Any] | None:
    """``--update``: a JSON object, or None without one."""
    if text is None:
        return None
    try:
        values = json.loads(text)
    except ValueError as exc:
        raise click.BadParameter(
            f"{text!r} is not JSON ({exc}); quote it for the shell, e.g. '{{\"amount\": 120}}'",
            param_hint="'--update'",
        ) from exc
    if not isinstance(values, dict):
        raise click.BadParameter(
            "give a JSON object of the state keys to replace, such as '{\"amount\": 120}'",
            param_hint="'--update'",
        )
    return values
