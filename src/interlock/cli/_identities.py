"""``interlock principal`` and ``interlock token``: who may use the approval server.

Principals and their tokens live in the app's store (``--store URL`` or ``--app``), where every
server that serves it follows them: a principal disabled, or a token made or revoked, here
takes effect on every running server within a second, without a restart. ``token new`` still
prints an entry for a tokens file (``interlock serve --tokens``), the format a store can be
seeded from.

These commands need the server extra (``pip install 'interlock[server]'``), which makes and
hashes tokens; `serve_auth` is how ``interlock serve`` chooses between the store and a file.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar, get_args

import anyio
import click
from rich.markup import escape

from .._errors import InterlockError
from ..stores import PrincipalRecord, Role, Store, TokenRecord
from ._load import open_target, target_options
from ._output import Refused, ago, echo_json, err_console, out_console, run, to_builtins
from ._startup import one_line
from ._views import new_table

if TYPE_CHECKING:
    from ..server import Authenticator, TokenAuth

__all__ = ["principal", "serve_auth", "server_extra", "token"]

T = TypeVar("T")

_ROLES = click.Choice(get_args(Role))


@contextmanager
def server_extra() -> Iterator[None]:
    """Turn the import of the server's modules failing into a refusal that names the extra."""
    try:
        yield
    except ImportError as exc:
        raise Refused(
            f"this command needs the server extra ({exc.name} is missing): pip install "
            "'interlock[server]', or in a clone of interlock: pip install '.[server]'"
        ) from exc


def _on_store(
    app_spec: str | None,
    store_url: str | None,
    act: Callable[[Store], Coroutine[Any, Any, T]],
    *,
    new_ok: bool = False,
) -> T:
    """Run ``act`` on the store the options name, then close it.

    A refusal of an argument (a name with white space around it...) is a usage error.
    """
    target = open_target(app_spec, store_url, decides=False, new_ok=new_ok)

    async def body() -> T:
        try:
            return await act(target.store)
        finally:
            await target.aclose()

    try:
        result: T = run(body)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    return result


# -- principals ----------------------------------------------------------------------------------


@click.group()
def principal() -> None:
    """The people and services who may use the approval server, kept in the store.

    A principal has a role (viewer, approver, admin) and groups; its tokens let it in. A
    disabled principal's tokens are refused by every running server within a second.
    """


@principal.command("add")
@click.argument("name")
@click.option("--role", type=_ROLES, default="approver", show_default=True)
@click.option("--display-name", default="", help="How people see it (default: its name).")
@click.option("--group", "groups", multiple=True, help="A group it belongs to (repeatable).")
@click.option("--email", help="Its e-mail address, for e-mail links (unique among principals).")
@click.option(
    "--slack-user",
    metavar="ID",
    help="Its Slack user id (U024BE7LH), which maps who acts in Slack to it (unique).",
)
@target_options
def add(
    name: str,
    role: Role,
    display_name: str,
    groups: tuple[str, ...],
    email: str | None,
    slack_user: str | None,
    app_spec: str | None,
    store_url: str | None,
) -> None:
    """Add the principal NAME (names are compared case-folded: Ana and ana are one).

    \b
    Example:
      interlock principal add ana --role approver --group finance \\
        --email ana@example.com --slack-user U024BE7LH --store sqlite:///app.db
    """
    added: PrincipalRecord = _on_store(
        app_spec,
        store_url,
        lambda store: store.add_principal(
            name,
            role=role,
            display_name=display_name,
            groups=groups,
            email=email,
            slack_user=slack_user,
        ),
        new_ok=True,
    )
    click.echo(
        f"added {added.name} ({added.role}); make it a token with: interlock token create "
        f"{_quoted(added.name)}",
        err=True,
    )


@principal.command("update")
@click.argument("name")
@click.option("--role", type=_ROLES, help="Its new role.")
@click.option("--display-name", help="How people see it ('' for its name).")
@click.option(
    "--group",
    "groups",
    multiple=True,
    help="A group it belongs to (repeatable): the groups given replace its groups.",
)
@click.option("--no-groups", is_flag=True, help="Take it out of every group.")
@click.option("--email", help="Its e-mail address ('' clears it); unique among principals.")
@click.option("--slack-user", metavar="ID", help="Its Slack user id ('' clears it); unique.")
@target_options
def update(
    name: str,
    role: Role | None,
    display_name: str | None,
    groups: tuple[str, ...],
    no_groups: bool,
    email: str | None,
    slack_user: str | None,
    app_spec: str | None,
    store_url: str | None,
) -> None:
    """Change what is given of the principal NAME; the rest stays as it is.

    Every running server that follows the store takes the change within a second. The
    e-mail address is where e-mail links go; the Slack user id says which principal clicked
    a button in Slack.

    \b
    Example:
      interlock principal update ana --email ana@example.com --slack-user U024BE7LH \\
        --store sqlite:///app.db
    """
    if groups and no_groups:
        raise click.UsageError("give --group or --no-groups, not both")
    if (role, display_name, email, slack_user) == (None, None, None, None) and not (
        groups or no_groups
    ):
        raise click.UsageError(
            "nothing to change: give --role, --display-name, --group, --no-groups, --email "
            "or --slack-user"
        )
    changed: PrincipalRecord = _on_store(
        app_spec,
        store_url,
        lambda store: store.update_principal(
            name,
            role=role,
            display_name=display_name,
            groups=() if no_groups else groups or None,
            email=email,
            slack_user=slack_user,
        ),
    )
    contacts = ", ".join(
        f"{what} {value}"
        for what, value in (("e-mail", changed.email), ("Slack user", changed.slack_user))
        if value
    )
    click.echo(
        f"updated {changed.name} ({changed.role}{'; ' + contacts if contacts else ''})", err=True
    )


@principal.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (exact times) instead.")
@target_options
def list_principals(as_json: bool, app_spec: str | None, store_url: str | None) -> None:
    """List the principals, by name."""

    async def every(store: Store) -> list[PrincipalRecord]:
        found: list[PrincipalRecord] = []
        while page := await store.principals(limit=500, after=found[-1].name if found else None):
            found += page
        return found

    found: list[PrincipalRecord] = _on_store(app_spec, store_url, every)
    if as_json:
        echo_json([_principal_json(p) for p in found])
        return
    if not found:
        out_console().print("No principal yet: add one with `interlock principal add NAME`.")
        return
    table = new_table()
    for column in ("name", "role", "groups", "contact", "status", "added"):
        table.add_column(column, no_wrap=column not in ("groups", "contact"))
    for p in found:
        shown = escape(p.name) + (f" ({escape(p.display_name)})" if p.display_name else "")
        contact = [p.email or "", f"slack {p.slack_user}" if p.slack_user else ""]
        table.add_row(
            shown,
            p.role,
            escape(", ".join(p.groups)) or "-",
            escape(", ".join(c for c in contact if c)) or "-",
            "disabled" if p.disabled else "enabled",
            ago(p.created_at),
        )
    out_console().print(table)


@principal.command("disable")
@click.argument("name")
@target_options
def disable(name: str, app_spec: str | None, store_url: str | None) -> None:
    """Disable NAME: every running server refuses its tokens within a second."""
    changed: PrincipalRecord = _on_store(
        app_spec, store_url, lambda store: store.update_principal(name, disabled=True)
    )
    click.echo(f"disabled {changed.name}: its tokens are refused until it is enabled", err=True)


@principal.command("enable")
@click.argument("name")
@target_options
def enable(name: str, app_spec: str | None, store_url: str | None) -> None:
    """Enable NAME again: its tokens that are neither revoked nor expired work again."""
    changed: PrincipalRecord = _on_store(
        app_spec, store_url, lambda store: store.update_principal(name, disabled=False)
    )
    click.echo(f"enabled {changed.name}", err=True)


def _principal_json(p: PrincipalRecord) -> dict[str, Any]:
    shown = to_builtins(p)
    del shown["rev"]
    return dict(shown)


# -- tokens --------------------------------------------------------------------------------------


@click.group()
def token() -> None:
    """Tokens of the approval server: in the store (create, list, revoke) or in a file (new)."""


@token.command("create")
@click.argument("principal_name", metavar="PRINCIPAL")
@click.option(
    "--role", type=_ROLES, help="The most it may do: the principal's role or lower (default)."
)
@click.option("--tool", "tools", multiple=True, help="A tool pattern it may decide (repeatable).")
@click.option("--thread", "threads", multiple=True, help="A thread-id prefix it may see.")
@click.option(
    "--expires",
    metavar="WHEN",
    help="A duration (12h, 30d, 1w) or a timestamp with its zone (2030-01-31T18:00:00Z).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the token and its record as JSON.")
@target_options
def create(
    principal_name: str,
    role: Role | None,
    tools: tuple[str, ...],
    threads: tuple[str, ...],
    expires: str | None,
    as_json: bool,
    app_spec: str | None,
    store_url: str | None,
) -> None:
    """Make a token for PRINCIPAL and print it, once: the store keeps only its hash.

    It can narrow what its principal may do (--role, --tool, --thread), never widen it.
    Every running server that serves the store takes it within a second.

    \b
    Example:
      interlock token create ana --expires 30d --tool 'send_*' --store sqlite:///app.db
    """
    with server_extra():
        from ..server import IssuedToken, issue_token, parse_expiry

    try:
        expires_at = None if expires is None else parse_expiry(expires)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--expires'") from exc
    issued: IssuedToken = _on_store(
        app_spec,
        store_url,
        lambda store: issue_token(
            store,
            principal_name,
            role=role,
            tools=tools or ("*",),
            threads=threads or ("",),
            expires_at=expires_at,
        ),
    )
    record = issued.record
    if as_json:
        echo_json({"token": issued.token, **_token_json(record)})
        return
    until = "never expires" if record.expires_at is None else f"expires {_when(record.expires_at)}"
    click.echo(
        f"token {record.id} for {record.principal} ({until}); give it to them, it is shown "
        "only this once:",
        err=True,
    )
    click.echo(issued.token)


@token.command("list")
@click.option("--principal", "principal_name", metavar="NAME", help="Only this principal's.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (exact times) instead.")
@target_options
def list_tokens(
    principal_name: str | None, as_json: bool, app_spec: str | None, store_url: str | None
) -> None:
    """List the tokens by id, revoked and expired ones included (never a token itself)."""

    async def every(store: Store) -> list[TokenRecord]:
        found: list[TokenRecord] = []
        while page := await store.tokens(
            principal=principal_name, limit=500, after=found[-1].id if found else None
        ):
            found += page
        return found

    found: list[TokenRecord] = _on_store(app_spec, store_url, every)
    if as_json:
        echo_json([_token_json(t) for t in found])
        return
    if not found:
        out_console().print("No token yet: make one with `interlock token create PRINCIPAL`.")
        return
    now = time.time()
    table = new_table()
    for column in ("id", "principal", "role", "scopes", "status", "made", "expires", "used"):
        table.add_column(column, no_wrap=column != "scopes")
    for t in found:
        table.add_row(
            t.id,
            escape(t.principal),
            t.role or "its own",
            escape(_scopes(t)),
            _status(t, now),
            ago(t.created_at, now),
            "-" if t.expires_at is None else ago(t.expires_at, now),
            "-" if t.last_used_at is None else ago(t.last_used_at, now),
        )
    out_console().print(table)


@token.command("revoke")
@click.argument("token_id", metavar="[ID]", required=False)
@click.option(
    "--principal", "principal_name", metavar="NAME", help="Revoke every token of NAME instead."
)
@target_options
def revoke(
    token_id: str | None, principal_name: str | None, app_spec: str | None, store_url: str | None
) -> None:
    """Revoke the token ID (or, with --principal, all of a principal's): every running
    server refuses it within a second.

    \b
    Examples:
      interlock token revoke 3f9a1c2b7e41 --store sqlite:///app.db
      interlock token revoke --principal ana --store sqlite:///app.db
    """
    if (token_id is None) == (principal_name is None):
        raise click.UsageError("give the ID of one token, or --principal NAME for all of its")
    revoked: list[TokenRecord] = _on_store(
        app_spec,
        store_url,
        lambda store: store.revoke_tokens(id=token_id, principal=principal_name),
    )
    if not revoked:
        click.echo("nothing to revoke: revoked already", err=True)
    for t in revoked:
        click.echo(f"revoked {t.id} of {t.principal}", err=True)


@token.command("new")
@click.argument("name")
@click.option("--role", type=_ROLES, default="approver", show_default=True)
@click.option("--tool", "tools", multiple=True, help="A tool pattern it may decide (repeatable).")
@click.option("--thread", "threads", multiple=True, help="A thread-id prefix it may see.")
def new(name: str, role: Role, tools: tuple[str, ...], threads: tuple[str, ...]) -> None:
    """Print a new token for NAME on stderr and its tokens-file entry on stdout.

    The token is shown once; the file keeps only its hash. Append the entry to the file you
    pass to `interlock serve --tokens`. To keep tokens in the store instead, where they can
    be revoked while the server runs, use `interlock token create`.
    """
    with server_extra():
        from ..server import Identity, hash_token, new_token

    secret = new_token()
    try:
        Identity(name=name, role=role, tools=tools or ("*",), threads=threads or ("",))
    except (TypeError, ValueError) as exc:
        raise click.BadParameter(str(exc), param_hint="NAME") from exc
    click.echo(f"token for {name} (give it to them; it is not stored): {secret}", err=True)
    lines = ["[[identity]]", f"name = {_toml(name)}", f"role = {_toml(role)}"]
    lines.append(f"token_sha256 = {_toml(hash_token(secret))}")
    if tools:
        lines.append(f"tools = [{', '.join(_toml(t) for t in tools)}]")
    if threads:
        lines.append(f"threads = [{', '.join(_toml(t) for t in threads)}]")
    click.echo("\n".join(lines) + "\n")


def _token_json(t: TokenRecord) -> dict[str, Any]:
    shown = to_builtins(t)
    for internal in ("hash", "rev"):
        del shown[internal]
    shown["status"] = _status(t, time.time())
    return dict(shown)


def _status(t: TokenRecord, now: float) -> str:
    if t.revoked_at is not None:
        return "revoked"
    return "active" if t.live(now) else "expired"


def _scopes(t: TokenRecord) -> str:
    parts = []
    if t.tools != ("*",):
        parts.append("tools " + ", ".join(t.tools))
    if t.threads != ("",):
        parts.append("threads " + ", ".join(f"{p}*" for p in t.threads))
    return "; ".join(parts) or "all"


def _when(at: float) -> str:
    return f"{ago(at)} ({time.strftime('%Y-%m-%d %H:%M %Z', time.localtime(at))})"


def _quoted(name: str) -> str:
    return name if name.replace("-", "").replace("_", "").replace(".", "").isalnum() else repr(name)


def _toml(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


# -- what `interlock serve` authenticates with ----------------------------------------------------


def serve_auth(store: Store, tokens: TokenAuth | None, in_store: bool) -> Authenticator:
    """The authenticator ``interlock serve`` uses, and what it says about its choice.

    The principals and tokens of the store (a `StoreAuth`) when ``in_store`` is asked for or
    the store has a principal; a tokens file given then is imported into the store (what it
    has already is kept). Otherwise the tokens file alone, read once (a `TokenAuth`).

    Raises:
        click.UsageError: Neither the store nor a file names anybody.
    """
    with server_extra():
        from ..server import StoreAuth, import_tokens

    def at_start(call: Callable[[], Coroutine[Any, Any, T]]) -> T:
        # A store that cannot be reached is said in one line, as a server that cannot start.
        try:
            result: T = anyio.run(call)
        except InterlockError as exc:
            raise Refused(one_line(str(exc))) from exc
        return result

    async def has_principals() -> bool:
        return bool(await store.principals(limit=1))

    if not (in_store or at_start(has_principals)):
        if tokens is None:
            raise click.UsageError(
                "nobody could sign in: pass --tokens FILE (make entries with `interlock token "
                "new NAME`), or keep principals in the store: `interlock principal add NAME` "
                "and `interlock token create NAME`"
            )
        if not tokens.identities:
            raise click.BadParameter(
                "the file names no identity; add one with `interlock token new NAME`",
                param_hint="'--tokens'",
            )
        return tokens
    err = err_console()
    if tokens is not None:
        report = at_start(lambda: import_tokens(store, tokens))
        err.print(
            f"interlock: imported {len(report.principals)} principal(s) and "
            f"{len(report.tokens)} token(s) from the tokens file into the store"
        )
        for note in report.kept:
            err.print(f"interlock: {escape(note)}")
    elif not at_start(has_principals):
        err.print(
            "interlock: the store has no principal yet, so every token is refused: add one "
            "with `interlock principal add NAME` and make it a token with `interlock token "
            "create NAME`, while the server runs"
        )
    return StoreAuth(store)
