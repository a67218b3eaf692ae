"""``interlock serve``: the approval server for your app."""

from __future__ import annotations

import os
import secrets
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import click

from ._identities import serve_auth
from ._load import APP_VARIABLE, STORE_VARIABLE, open_target
from ._output import Refused
from ._startup import Startup, listen, refusal, where

if TYPE_CHECKING:
    from ..server import Webhook

__all__ = ["serve"]

TOKENS_VARIABLE = "INTERLOCK_TOKENS"
SSO_VARIABLE = "INTERLOCK_SSO"
SECRET_VARIABLE = "INTERLOCK_OIDC_CLIENT_SECRET"
WEBHOOK_SECRET_VARIABLE = "INTERLOCK_WEBHOOK_SECRET"
WebhookFormat = Literal["json", "slack", "teams"]
WEBHOOK_FORMATS: tuple[WebhookFormat, ...] = ("json", "slack", "teams")
"""The bodies ``--webhook`` sends: the event as signed JSON, a Slack message, a Teams card."""


@click.command()
@click.option(
    "--app",
    "app_spec",
    envvar=APP_VARIABLE,
    metavar="MODULE:ATTR",
    required=True,
    help=f"Your app, as module:attribute (env {APP_VARIABLE}).",
)
@click.option(
    "--store",
    "store_url",
    envvar=STORE_VARIABLE,
    metavar="URL",
    help=f"Override the app's store (env {STORE_VARIABLE}).",
)
@click.option(
    "--tokens",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar=TOKENS_VARIABLE,
    help=f"The identities and their token hashes, TOML or JSON (env {TOKENS_VARIABLE}); "
    "make entries with `interlock token new`. Imported into the store when the server "
    "authenticates with the store's principals.",
)
@click.option(
    "--store-identities",
    is_flag=True,
    help="Authenticate with the principals and tokens kept in the store (the default once it "
    "has a principal), managed while the server runs with `interlock principal` and "
    "`interlock token`, or over HTTP.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option("--four-eyes", is_flag=True, help="Whoever started a run may not approve it.")
@click.option(
    "--no-continue",
    "no_continue",
    is_flag=True,
    help="Record decisions only; leave continuing the threads to workers.",
)
@click.option("--public-url", metavar="URL", help="This server's URL, for links in notifications.")
@click.option(
    "--webhook",
    "webhooks",
    multiple=True,
    metavar="[FORMAT:]URL",
    help="Send interrupt events to this URL (repeatable): as JSON signed with "
    f"${WEBHOOK_SECRET_VARIABLE} (json:, the default), or as a message for people in a Slack "
    "(slack:URL) or Microsoft Teams (teams:URL) channel.",
)
@click.option(
    "--cors-origin", "cors", multiple=True, metavar="ORIGIN", help="Allow a browser origin."
)
@click.option(
    "--sso",
    "sso_file",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar=SSO_VARIABLE,
    help=f"Sign people in to the web inbox (env {SSO_VARIABLE}): a TOML file with an [oidc] "
    "table (an OpenID provider; its client secret may come from "
    f"${SECRET_VARIABLE}) and/or a [proxy] table (a trusted reverse proxy that names people "
    "in headers). Tokens keep working beside it.",
)
@click.option(
    "--slack",
    "slack_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Post each question to Slack and take decisions there (the slack extra): a TOML file "
    "with the channel, routes by tool, and the names of the environment variables that hold "
    "the bot token and the signing secret. Slack's Interactivity Request URL is "
    "<public URL>/slack/interactions.",
)
def serve(
    app_spec: str,
    store_url: str | None,
    tokens: Path | None,
    store_identities: bool,
    host: str,
    port: int,
    four_eyes: bool,
    no_continue: bool,
    public_url: str | None,
    webhooks: tuple[str, ...],
    cors: tuple[str, ...],
    sso_file: Path | None,
    slack_file: Path | None,
) -> None:
    """Serve the HTTP API, its event stream and the web inbox (at /inbox) for your app.

    Who may call: the principals and tokens kept in the app's store, once it has one (or with
    --store-identities), which `interlock principal` and `interlock token` change while the
    server runs; else the tokens file, read once.

    \b
    Examples:
      interlock token new ana --role approver >> tokens.toml
      interlock serve --app shop.approvals:app --tokens tokens.toml --port 8000
      interlock principal add ana --app shop.approvals:app
      interlock token create ana --app shop.approvals:app
      interlock serve --app shop.approvals:app --port 8000
    """
    try:
        from ..server import Notifier, OIDCConfig, TokenAuth, TrustedProxy, Webhook, create_app
        from ._uvicorn import run_server
    except ImportError as exc:
        raise Refused(
            f"the server needs the server extra ({exc.name} is missing): "
            "pip install 'interlock[server]', or in a clone of interlock: pip install '.[server]'"
        ) from exc
    try:
        from_file = None if tokens is None else TokenAuth.from_file(tokens)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--tokens'") from exc
    sso: OIDCConfig | None = None
    proxy: TrustedProxy | None = None
    if sso_file is not None:
        tables = _sso_tables(sso_file)
        try:
            if "oidc" in tables:
                sso = OIDCConfig.from_config(tables["oidc"])
            if "proxy" in tables:
                proxy = TrustedProxy.from_config(tables["proxy"])
        except ValueError as exc:
            raise click.BadParameter(f"{sso_file}: {exc}", param_hint="'--sso'") from exc
        if sso is not None and sso.redirect_url is None and public_url is None:
            raise click.BadParameter(
                f"{sso_file}: [oidc] needs redirect_url (the callback URL registered at the "
                "provider, .../auth/callback), or give --public-url",
                param_hint="'--sso'",
            )
    channels: list[Any] = []
    if webhooks:
        channels += _webhooks(Webhook, webhooks)
    if slack_file is not None:
        channels.append(_slack(slack_file))
    notifier = Notifier(channels) if channels else None
    # Bound first: a taken port is refused before anything opens, and the banner can name
    # the port the system picked for --port 0.
    with listen(host, port) as sock:
        target = open_target(app_spec, store_url, decides=True, new_ok=True)
        assert target.app is not None
        try:
            auth = serve_auth(target.app.store, from_file, store_identities)
            try:
                server = create_app(
                    target.app,
                    auth=auth,
                    four_eyes=four_eyes,
                    continue_runs=not no_continue,
                    notifier=notifier,
                    public_url=public_url,
                    cors_origins=cors,
                    sso=sso,
                    proxy=proxy,
                )
            except ImportError as exc:  # single sign-on without the sso extra
                raise Refused(str(exc)) from exc
            api = Startup(server)
            url = f"http://{where(host, sock.getsockname()[1])}"
            served = run_server(
                api,
                sock,
                f"interlock: serving {target.app.plan.name!r} on {url} (web inbox at /inbox, "
                "API at /v1, OpenAPI at /openapi.json); Ctrl-C stops",
            )
        finally:
            anyio.run(target.app.store.close)
    if not served:
        if api.error is None:
            raise Refused("the server stopped before it listened; see the log above")
        refused = refusal(api.error)
        if refused is None:
            raise api.error
        raise refused from api.error


def _slack(path: Path) -> Any:
    """The Slack channel an ``--slack`` file describes (its secrets from the environment)."""
    try:
        from ..server import Slack, SlackConfigError
    except ImportError as exc:
        raise Refused(
            f"--slack needs the slack extra ({exc.name} is missing): pip install 'interlock[slack]'"
        ) from exc
    try:
        return Slack.from_file(path)
    except SlackConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="'--slack'") from exc


def _webhooks(factory: type[Webhook], specs: tuple[str, ...]) -> list[Webhook]:
    """The webhooks of the ``--webhook [FORMAT:]URL`` options, made with ``factory``."""
    chosen: list[tuple[WebhookFormat, str]] = []
    for spec in specs:
        form, sep, rest = spec.partition(":")
        if sep and form in WEBHOOK_FORMATS:
            chosen.append((form, rest))
        elif sep and form.lower() in ("http", "https"):
            chosen.append(("json", spec))
        else:
            raise click.BadParameter(
                f"{spec!r} is not [FORMAT:]URL: write an http(s) URL, optionally after one of "
                f"{', '.join(f + ':' for f in WEBHOOK_FORMATS)} (e.g. teams:https://...)",
                param_hint="'--webhook'",
            )
    secret = os.environ.get(WEBHOOK_SECRET_VARIABLE, "")
    if not secret:
        if any(form == "json" for form, _ in chosen):
            raise click.UsageError(
                f"--webhook needs a signing secret: set {WEBHOOK_SECRET_VARIABLE} (receivers "
                "check the webhook-signature header with it; a whsec_ secret or any long random "
                "string)"
            )
        # Slack and Teams check no signature: a key nobody knows signs their requests.
        secret = secrets.token_urlsafe(32)
    made: list[Webhook] = []
    names: set[str] = set()
    for form, url in chosen:
        try:
            hook = factory(url, secret=secret, format=form)
            if hook.name in names:  # two webhooks on one host: numbered in the log
                hook = factory(
                    url, secret=secret, format=form, name=f"{hook.name} #{len(made) + 1}"
                )
        except ValueError as exc:
            where = f"${WEBHOOK_SECRET_VARIABLE}" if "secret" in str(exc) else repr(url)
            raise click.BadParameter(f"{where}: {exc}", param_hint="'--webhook'") from exc
        names.add(hook.name)
        made.append(hook)
    return made


def _sso_tables(path: Path) -> dict[str, dict[str, Any]]:
    """The ``[oidc]`` and ``[proxy]`` tables of an ``--sso`` file (anything else is refused)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise click.BadParameter(
            f"cannot read {path}: {exc.strerror}", param_hint="'--sso'"
        ) from exc
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise click.BadParameter(f"{path} is not valid TOML: {exc}", param_hint="'--sso'") from exc
    unknown = sorted(set(data) - {"oidc", "proxy"})
    if unknown:
        raise click.BadParameter(
            f"{path}: unknown key(s) {unknown}; the file has an [oidc] table, a [proxy] table, "
            "or both",
            param_hint="'--sso'",
        )
    if not data:
        raise click.BadParameter(f"{path} has neither [oidc] nor [proxy]", param_hint="'--sso'")
    for name, table in data.items():
        if not isinstance(table, dict):
            raise click.BadParameter(f"{path}: {name} must be a table", param_hint="'--sso'")
    if "oidc" in data and "client_secret" not in data["oidc"]:
        secret = os.environ.get(SECRET_VARIABLE, "")
        if not secret:
            raise click.BadParameter(
                f"{path}: [oidc] needs client_secret, or set {SECRET_VARIABLE}",
                param_hint="'--sso'",
            )
        data["oidc"] = {**data["oidc"], "client_secret": secret}
    return data


@click.group()
def token() -> None:
    """Make tokens for the approval server."""


@token.command("new")
@click.argument("name")
@click.option(
    "--role",
    type=click.Choice(["viewer", "approver", "admin"]),
    default="approver",
    show_default=True,
)
@click.option("--tool", "tools", multiple=True, help="A tool pattern it may decide (repeatable).")
@click.option("--thread", "threads", multiple=True, help="A thread-id prefix it may see.")
def new(name: str, role: str, tools: tuple[str, ...], threads: tuple[str, ...]) -> None:
    """Print a new token for NAME on stderr and its configuration entry on stdout.

    The token is shown once; the server keeps only its hash. Append the entry to the file
    you pass to `interlock serve --tokens`.
    """
    from ..server import Identity, hash_token, new_token

    secret = new_token()
    try:
        Identity(name=name, role=role, tools=tools or ("*",), threads=threads or ("",))  # type: ignore[arg-type]
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


def _toml(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
