"""Finding the user's app and its store: ``--app module:attribute`` and ``--store URL``.

The app is named as uvicorn and celery name theirs: ``--app shop.approvals:app`` imports
``shop.approvals`` (the current directory is on the import path) and takes its ``app``. The
attribute is an `App`, an agent or a graph (compiled here on the store given with ``--store``),
or a callable taking no arguments that returns an `App`. ``--store`` names a store by URL
(see `interlock.stores.open_store`) and overrides the app's own.

Commands that only read (the inbox, a question, a history, the audit log) and ``pause`` work
from a store alone, decoding questions with the default `Codec`; commands that decide or
continue a thread need the app, whose graph runs the tasks.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

import click

from ..agents import Agent
from ..runtime import App, Graph, Reader
from ..serde import Codec
from ..stores import STORE_URL_FORMS, MemoryStore, SqliteStore, Store, open_store
from ._output import Refused

__all__ = ["APP_VARIABLE", "STORE_VARIABLE", "Target", "open_target", "target_options"]

APP_VARIABLE: Final = "INTERLOCK_APP"
"""The environment variable ``--app`` falls back to."""
STORE_VARIABLE: Final = "INTERLOCK_STORE"
"""The environment variable ``--store`` falls back to."""

_F = TypeVar("_F", bound=Callable[..., Any])


def target_options(fn: _F) -> _F:
    """Add ``--app`` and ``--store`` to a command."""
    fn = click.option(
        "--store",
        "store_url",
        envvar=STORE_VARIABLE,
        metavar="URL",
        help=(
            "Where the threads are: sqlite:///path.db, sqlite:////abs/path.db or "
            f"postgresql://user@host:port/db (env {STORE_VARIABLE}). Overrides the app's store."
        ),
    )(fn)
    fn = click.option(
        "--app",
        "app_spec",
        envvar=APP_VARIABLE,
        metavar="MODULE:ATTR",
        help=(
            "Your app, as module:attribute: an interlock App, or a callable returning one "
            f"(env {APP_VARIABLE}). The current directory is on the import path."
        ),
    )(fn)
    return fn


@dataclass(frozen=True, kw_only=True)
class Target:
    """What a command works on: a store, and the app when one was named."""

    store: Store
    """Where the threads are."""
    app: App[Any] | None
    """The app (None: the command reads the store alone)."""
    codec: Codec
    """Decodes questions: the app's, or the default codec without an app."""
    owned: bool
    """The store was opened for this command, which closes it when done."""

    @property
    def reader(self) -> Reader:
        """Reads questions and checkpoints' metadata: the app's reader, or the store's alone."""
        return self.app.reader if self.app is not None else Reader(self.store, self.codec)

    async def aclose(self) -> None:
        """Close the store if this command opened it."""
        if self.owned:
            await self.store.close()


def open_target(
    app_spec: str | None, store_url: str | None, *, decides: bool, new_ok: bool = False
) -> Target:
    """Resolve ``--app`` and ``--store`` into a `Target`.

    Args:
        app_spec: ``module:attribute``, or None.
        store_url: A store URL, or None.
        decides: The command decides or continues threads, so it needs the app.
        new_ok: A SQLite file that does not exist yet is made (a server's first start).

    Raises:
        click.UsageError: An option is missing or wrong (exit status 2).
        Refused: The app's module failed to import, or the store's file does not exist.
    """
    ctx = click.get_current_context()
    if decides and not app_spec:
        command = " ".join(["interlock", *ctx.command_path.split()[len(_root(ctx)) :]])
        raise click.UsageError(
            f"`{command}` needs your app, whose graph continues the thread: pass "
            f"--app module:attribute or set {APP_VARIABLE}",
            ctx,
        )
    store: Store | None = None
    if store_url:
        try:
            store = open_store(store_url)
        except ValueError as exc:
            raise click.BadParameter(str(exc), ctx, param_hint="'--store'") from exc
        except ImportError as exc:
            raise Refused(str(exc)) from exc
    if app_spec:
        app, fresh = _load_app(app_spec, store, ctx)
        target = Target(store=app.store, app=app, codec=app.plan.codec, owned=fresh)
    elif store is not None:
        target = Target(store=store, app=None, codec=Codec(), owned=True)
    else:
        raise click.UsageError(
            f"say where the threads are: pass --store URL ({STORE_URL_FORMS}) or set "
            f"{STORE_VARIABLE}; or name your app with --app module:attribute ({APP_VARIABLE})",
            ctx,
        )
    if not new_ok:
        _check_exists(target.store)
    return target


def _load_app(spec: str, store: Store | None, ctx: click.Context) -> tuple[App[Any], bool]:
    """The app ``spec`` names, on ``store`` when one is given; and whether it is new."""
    found = _find(spec, ctx)
    fresh = True
    if isinstance(found, App):
        app: App[Any] = found
        fresh = False
    elif isinstance(found, Agent | Graph):
        if store is None:
            raise _bad_app(
                spec, f"it is {_an(found)} without a store of its own: pass --store URL too", ctx
            )
        return found.compile(store=store), True
    elif callable(found):
        try:
            made = found()
        except Exception as exc:
            raise Refused(
                f"calling {spec}() to make the app failed: {type(exc).__name__}: {exc}; fix it "
                "or name the App itself with --app"
            ) from exc
        if not isinstance(made, App):
            raise _bad_app(spec, f"{spec}() returned {_an(made)}, not an interlock App", ctx)
        app = made
    else:
        raise _bad_app(
            spec, f"it is {_an(found)}: name an interlock App or a function returning one", ctx
        )
    if store is not None:
        # The same graph and settings, on the store the command line names.
        rebound: App[Any] = App(
            app.plan,
            store=store,
            durability=app.durability,
            recursion_limit=app.recursion_limit,
            lease_ttl=app.lease.ttl,
        )
        return rebound, True
    if isinstance(app.store, MemoryStore):
        raise _bad_app(
            spec,
            "its threads are kept in memory, where no other process sees them: compile it "
            "with a SqliteStore or PostgresStore, or pass --store URL",
            ctx,
        )
    return app, fresh


def _find(spec: str, ctx: click.Context) -> object:
    """Import ``module`` and walk ``attribute`` (dots reach into objects)."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise _bad_app(spec, "write it as module:attribute, e.g. shop.approvals:app", ctx)
    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)
    try:
        found: object = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name + ".").startswith(exc.name + "."):
            raise _bad_app(
                spec,
                f"no module named {exc.name!r} in {here} or on the import path: run the "
                "command from your project's folder, or add it to PYTHONPATH",
                ctx,
            ) from exc
        raise Refused(f"importing {module_name} failed: {exc}; install what it needs") from exc
    except Exception as exc:
        raise Refused(
            f"importing {module_name} failed: {type(exc).__name__}: {exc}; fix the module and "
            "try again"
        ) from exc
    for part in attribute.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise _bad_app(spec, f"{module_name} has no attribute {attribute!r}", ctx) from None
    return found


def _check_exists(store: Store) -> None:
    # SQLite would create an empty file and report nothing in it: a typo would look like an
    # empty inbox.
    if isinstance(store, SqliteStore) and not Path(store.path).exists():
        raise Refused(
            f"no database at {Path(store.path).resolve()}: check the store's path (a "
            "relative one is read from the current directory) and run the command again"
        )


def _root(ctx: click.Context) -> list[str]:
    """The words that name the program itself (``interlock``, ``python -m interlock.cli``)."""
    return ctx.find_root().command_path.split()


def _bad_app(spec: str, why: str, ctx: click.Context) -> click.BadParameter:
    return click.BadParameter(f"{spec!r}: {why}", ctx, param_hint="'--app'")


def _an(value: object) -> str:
    name = type(value).__name__
    return f"an {name}" if name[:1].lower() in "aeiou" else f"a {name}"
