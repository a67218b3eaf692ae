"""``interlock graph``: print the app's graph as Mermaid text.

It needs the app's graph only, never its store: an `App` is drawn as it is, an agent or a graph
not compiled yet is drawn from its plan (a graph's breakpoints are given when it is compiled,
so none are drawn), and a callable with no arguments is called for the `App` it returns.
"""

from __future__ import annotations

import click

from .._errors import GraphDefinitionError
from ..agents import Agent
from ..graph import CompiledGraph, GraphBuilder
from ..runtime import App
from ._load import APP_VARIABLE, _an, _bad_app, _find
from ._output import Refused

__all__ = ["graph"]


@click.command()
@click.option(
    "--app",
    "app_spec",
    envvar=APP_VARIABLE,
    metavar="MODULE:ATTR",
    help=(
        "Your app, as module:attribute: an interlock App, an agent, a graph, or a callable "
        f"returning an App (env {APP_VARIABLE}). The current directory is on the import path."
    ),
)
def graph(app_spec: str | None) -> None:
    """Print the app's graph as Mermaid text, to paste into any Mermaid viewer.

    Nodes and edges, conditional edges with their labels, breakpoints (⏸), subgraphs and
    agents drawn inside the nodes that run them, and the tools that may wait for approval
    (🔒). No store is opened.
    """
    ctx = click.get_current_context()
    if not app_spec:
        raise click.UsageError(
            f"`interlock graph` draws your app: pass --app module:attribute or set {APP_VARIABLE}",
            ctx,
        )
    found = _find(app_spec, ctx)
    try:
        if isinstance(found, App | Agent | CompiledGraph):
            text = found.draw()
        elif isinstance(found, GraphBuilder):
            text = found.plan((), ()).draw()
        elif callable(found):
            try:
                made = found()
            except Exception as exc:
                raise Refused(
                    f"calling {app_spec}() to make the app failed: {type(exc).__name__}: {exc}; "
                    "fix it or name the App itself with --app"
                ) from exc
            if not isinstance(made, App):
                raise _bad_app(
                    app_spec, f"{app_spec}() returned {_an(made)}, not an interlock App", ctx
                )
            text = made.draw()
        else:
            raise _bad_app(
                app_spec,
                f"it is {_an(found)}: name an interlock App, agent or graph, or a function "
                "returning an App",
                ctx,
            )
    except GraphDefinitionError as exc:
        raise Refused(f"{app_spec} is not a graph that can be drawn: {exc}") from exc
    click.echo(text, nl=False)
