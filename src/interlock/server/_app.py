"""`create_app`: the approval server as an ASGI application (Starlette)."""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from importlib import metadata, resources
from typing import TYPE_CHECKING, Any, Final

import anyio
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from .._errors import CheckpointCorrupt, InterlockError, StoreClosed, StoreError
from ..runtime import App
from ._api import _identity
from ._errors import ApiError, json_response
from ._events import ServerEvent
from ._graph import mermaid_script
from ._limits import BodyLimit, RateLimiter, SecurityHeaders
from ._oidc import OIDCConfig, redirect_for
from ._openapi import openapi
from ._params import declare
from ._proxy import ProxyHeaders, TrustedProxy
from ._redact import ACCESS_LOGGER, RedactTokens
from ._routes import ROUTES
from ._served import Served
from ._sessions import Sessions
from ._signin import browser_session, sign_in, sign_in_callback, sign_out
from ._state import Authenticator, Metrics, Runs, ServerState
from ._views import Status

if TYPE_CHECKING:
    from ._oidc_client import OIDCProvider

__all__ = ["create_app"]

log = logging.getLogger("interlock.server")

_NAME: Final = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")

_RETRY: Final = {"Retry-After": "5"}

PENDING_REFRESH: Final = 5.0
"""Seconds between counts of the pending interrupts for ``interlock_interrupts_pending``
(a scrape of ``/metrics`` counts them too)."""

FOLLOW_BATCH: Final = 500
"""Changes the server's follower reads at a time; after a full batch it reads again at once."""

Listener = Callable[[ServerEvent], Coroutine[Any, Any, None]]


def create_app(
    apps: App[Any] | Mapping[str, App[Any]] | Sequence[App[Any]],
    *,
    auth: Authenticator,
    four_eyes: bool = False,
    continue_runs: bool = True,
    notifier: Any = None,
    public_url: str | None = None,
    max_body_bytes: int = 1_000_000,
    decisions_per_second: float = 5.0,
    decision_burst: int = 20,
    cors_origins: Sequence[str] = (),
    background_runs: int = 64,
    poll_interval: float = 0.05,
    heartbeat: float = 15.0,
    web: bool = True,
    sso: OIDCConfig | None = None,
    proxy: TrustedProxy | None = None,
) -> Starlette:
    """The approval server for ``apps``: the ``/v1`` HTTP API, its event stream, the web inbox.

    Args:
        apps: An `App`, several (named by their graphs' names), or ``{name: app}``. Each must
            have a store of its own.
        auth: Who may call (`TokenAuth`, or anything with ``authenticate(header)``).
        four_eyes: Refuse a decision by the identity that started the run that asks (the
            ``started_by`` metadata of the run: the server sets it for runs it starts; pass
            ``metadata={"started_by": name}`` to ``App.run`` for runs started elsewhere).
        continue_runs: After a decision, continue the thread in this server's background
            (False: leave it to workers or ``App.resume``). An App whose database has
            workers installed (`interlock.workers.Workers.install`) is left to them anyway:
            their trigger queues each continuation, and one owner runs it.
        notifier: A `Notifier` to give every event to (webhooks, email). A channel of it
            with an ``attach(state)`` method (Slack, e-mail links) is given the server and
            mounts the routes that method returns.
        public_url: This server's URL as people reach it, for links in notifications.
        max_body_bytes: Larger request bodies are refused (413).
        decisions_per_second: Each identity's sustained rate of decisions (429 beyond it).
        decision_burst: How many decisions an identity may send at once.
        cors_origins: Origins allowed to call from a browser (none by default).
        background_runs: Runs at once in the background; more wait for a slot.
        poll_interval: Seconds between reads of each store's change feed.
        heartbeat: Seconds between keep-alive comments on an idle event stream.
        web: Serve the web inbox at ``/inbox``.
        sso: Sign people in to the web inbox with an OpenID provider (`OIDCConfig`; needs
            the ``sso`` extra): ``/auth/login``, ``/auth/callback`` and ``/auth/logout``.
            Bearer tokens keep working beside it.
        proxy: Believe the identity headers of a reverse proxy that signs people in
            (`TrustedProxy`), from its addresses only.

    Mounted inside another Starlette (or FastAPI) app, its lifespan must run (a sketch; the
    approvers' page runs it)::

        api = create_app(app, auth=auth)
        outer = Starlette(routes=[Mount("/approvals", api)], lifespan=api.router.lifespan_context)
    """
    served = _served(apps, public_url)
    if not callable(getattr(auth, "authenticate", None)):
        raise TypeError(
            "auth must have authenticate(header) -> Identity | None, e.g. "
            "interlock.server.TokenAuth.from_file('tokens.toml')"
        )
    for name, value, lo in (
        ("max_body_bytes", max_body_bytes, 1),
        ("decisions_per_second", decisions_per_second, 1e-6),
        ("decision_burst", decision_burst, 1),
        ("background_runs", background_runs, 1),
        ("poll_interval", poll_interval, 0.001),
        ("heartbeat", heartbeat, 0.01),
    ):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"{name} must be a number, not {value!r}")
        if not value >= lo:
            raise ValueError(f"{name} must be at least {lo}, not {value!r}")
    for one in served.values():
        one.four_eyes = bool(four_eyes)
    if sso is not None and not isinstance(sso, OIDCConfig):
        raise TypeError(f"sso must be an OIDCConfig, not {sso!r}")
    if proxy is not None and not isinstance(proxy, TrustedProxy):
        raise TypeError(f"proxy must be a TrustedProxy, not {proxy!r}")
    oidc = None if sso is None else _provider(sso, redirect_for(sso, public_url))
    metrics = Metrics()
    state = ServerState(
        served=served,
        auth=auth,
        four_eyes=bool(four_eyes),
        continue_runs=bool(continue_runs),
        limiter=RateLimiter(decisions_per_second, decision_burst),
        metrics=metrics,
        runs=Runs(metrics, background_runs),
        heartbeat=heartbeat,
        poll_interval=poll_interval,
        sessions=None
        if sso is None and proxy is None
        else Sessions(lifetime=sso.session_seconds if sso is not None else 8 * 3600.0),
        oidc=oidc,
        proxy=None if proxy is None else ProxyHeaders(proxy),
    )
    if notifier is not None:
        publish = getattr(notifier, "publish", None)
        if not callable(publish) or not hasattr(notifier, "__aenter__"):
            raise TypeError("notifier must be a Notifier (an async context with publish(event))")
        state.listeners.append(publish)
        state.notifier = notifier

    routes: list[BaseRoute] = [
        Route(
            route.path,
            _endpoint(state, route.name, route.handler, query=route.query, body=route.body),
            methods=[route.method],
            name=route.name,
        )
        for route in ROUTES
    ]
    for channel in getattr(notifier, "channels", ()):
        # A channel people answer through (Slack's buttons, e-mail links) brings its own
        # routes, and keeps the server to read questions and decide (`_deciding`).
        attach = getattr(channel, "attach", None)
        if callable(attach):
            routes += list(attach(state))
    inputs = {name: s.app.plan.schema.names for name, s in served.items()}
    document = openapi("interlock", _version(), inputs=inputs)
    routes += [
        Route("/openapi.json", lambda _: json_response(document), name="openapi"),
        Route("/healthz", _endpoint(state, "healthz", _healthz), name="healthz"),
        Route("/readyz", _endpoint(state, "readyz", _readyz), name="readyz"),
        Route("/metrics", _endpoint(state, "metrics", _metrics), name="metrics"),
    ]
    if web or sso is not None or proxy is not None:
        routes.append(
            Route(
                "/auth/session",
                _endpoint(state, "auth_session", browser_session),
                name="auth_session",
            )
        )
    if sso is not None:
        routes += [
            Route("/auth/login", _endpoint(state, "auth_login", sign_in), name="auth_login"),
            Route(
                "/auth/callback",
                _endpoint(state, "auth_callback", sign_in_callback),
                name="auth_callback",
            ),
            Route(
                "/auth/logout",
                _endpoint(state, "auth_logout", sign_out),
                methods=["POST"],
                name="auth_logout",
            ),
        ]
    if web:
        static = resources.files("interlock.server") / "web"
        routes += [
            Route("/", lambda _: RedirectResponse("inbox", 307), name="root"),
            Route("/inbox", _page, name="inbox"),
            # Before the folder: the renderer is shipped gzipped and served gzip-encoded.
            Route("/web/vendor/mermaid.min.js", mermaid_script, name="mermaid_script"),
            Mount("/web", StaticFiles(directory=str(static)), name="web"),
        ]
    middleware = [Middleware(SecurityHeaders), Middleware(BodyLimit, max_bytes=max_body_bytes)]
    if cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(cors_origins),
                allow_methods=["GET", "POST"],
                allow_headers=["Authorization", "Content-Type", "Idempotency-Key", "Last-Event-ID"],
            )
        )
    server = Starlette(routes=routes, middleware=middleware, lifespan=_lifespan(state, notifier))
    server.state.interlock = state
    return server


def _provider(config: OIDCConfig, redirect_url: str) -> OIDCProvider:
    # Imported here, not at the top: Authlib is the sso extra's, and a server without single
    # sign-on runs without it.
    try:
        from ._oidc_client import OIDCProvider
    except ImportError as exc:
        raise ImportError(
            f"single sign-on needs the sso extra ({exc.name} is missing): "
            "pip install 'interlock[sso]'"
        ) from exc
    return OIDCProvider(config, redirect_url)


def _served(apps: Any, public_url: str | None) -> dict[str, Served]:
    if isinstance(apps, App):
        named: dict[str, Any] = {apps.plan.name: apps}
    elif isinstance(apps, Mapping):
        named = dict(apps)
    elif isinstance(apps, Sequence) and not isinstance(apps, str):
        named = {}
        for app in apps:
            if not isinstance(app, App):
                raise TypeError(f"apps must hold App objects, not {app!r}")
            if app.plan.name in named:
                raise ValueError(
                    f"two apps are named {app.plan.name!r}: pass {{name: app}} to tell them apart"
                )
            named[app.plan.name] = app
    else:
        raise TypeError(f"apps must be an App, a list of them or {{name: app}}, not {apps!r}")
    if not named:
        raise ValueError("give at least one App to serve")
    stores: dict[int, str] = {}
    out: dict[str, Served] = {}
    for name, app in named.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"app name {name!r} must be 1-100 of A-Z a-z 0-9 _ . -")
        if not isinstance(app, App):
            raise TypeError(f"apps[{name!r}] must be an App, not {app!r}")
        other = stores.setdefault(id(app.store), name)
        if other != name:
            raise ValueError(
                f"apps {other!r} and {name!r} share a store; serve each app with its own store "
                "(interrupt ids and threads would be ambiguous)"
            )
        out[name] = Served(name, app, public_url=public_url)
    return out


def _version() -> str:
    try:
        return metadata.version("interlock")
    except metadata.PackageNotFoundError:
        return "0"


def _endpoint(
    state: ServerState,
    name: str,
    handler: Callable[[Request], Coroutine[Any, Any, Response]],
    *,
    query: type | None = None,
    body: type | None = None,
) -> Callable[[Request], Coroutine[Any, Any, Response]]:
    """``handler`` with refusals answered as JSON, and timed; it may read its query and body
    as ``query`` and ``body`` (the types the route table names), and only so."""

    async def endpoint(request: Request) -> Response:
        started = time.perf_counter()
        declare(request.scope, query, body)
        try:
            response = await handler(request)
        except ApiError as refusal:
            response = refusal.response()
        except StoreClosed as exc:
            message = f"{exc}; restart the server"
            response = ApiError(503, "store_closed", message, headers=_RETRY).response()
        except StoreError as exc:
            log.warning("%s: the store failed: %s", name, exc)
            message = f"the store did not answer ({exc}); try again in a moment"
            response = ApiError(503, "store_unavailable", message, headers=_RETRY).response()
        except CheckpointCorrupt as exc:
            response = _failure(
                name,
                exc,
                f"{exc}; the record is damaged: restore the store from a backup",
                "damaged_record",
            )
        except Exception as exc:
            # Every refusal of what the client sent is an ApiError, raised where the request
            # is read: anything else (a ValueError or TypeError included) is this server's
            # fault, never the client's, and is answered 500 with the id of its log entry.
            response = _failure(name, exc, "the server failed", "internal")
        state.metrics.requests.labels(name, request.method, str(response.status_code)).inc()
        state.metrics.latency.labels(name).observe(time.perf_counter() - started)
        return response

    return endpoint


def _failure(name: str, exc: Exception, what: str, error: str) -> Response:
    """Log ``exc`` with its traceback under a new id; the 500 that names that id."""
    error_id = secrets.token_hex(8)
    log.error(
        "%s failed (error id %s): %s: %s", name, error_id, type(exc).__name__, exc, exc_info=exc
    )
    message = (
        f"{what} (error id {error_id}); the server's log has the details under that id: "
        "report it to whoever runs the server"
    )
    return ApiError(500, error, message, error_id=error_id).response()


async def _healthz(request: Request) -> Response:
    return json_response(Status(status="ok"))


async def _readyz(request: Request) -> Response:
    state: ServerState = request.app.state.interlock
    if not state.ready:
        return json_response(Status(status="starting"), 503)
    for served in state.served.values():
        try:
            await served.store.get_thread("readyz")
        except InterlockError as exc:
            log.warning("store of %s is not ready: %s", served.name, exc)
            return json_response(Status(status=f"store of {served.name} unavailable"), 503)
    return json_response(Status(status="ready"))


async def _metrics(request: Request) -> Response:
    state: ServerState = request.app.state.interlock
    identity = _identity(request, "viewer")
    if not ("*" in identity.tools and "" in identity.threads):
        # The series are labelled by tool (and count every thread's questions): an identity
        # whose scopes leave some out would read what they hide.
        raise ApiError(
            403,
            "out_of_scope",
            f"{identity.name} may not read the metrics: they name every tool and count every "
            "thread; use an identity whose scopes are every tool and every thread",
        )
    await _count_pending(state)
    return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)


async def _count_pending(state: ServerState) -> None:
    """Set the pending-interrupts gauge from the served apps (on failure it keeps its values)."""
    try:
        await state.metrics.runtime.refresh(*(served.app for served in state.served.values()))
    except InterlockError as exc:
        log.warning("counting the pending interrupts failed: %s", exc)


async def _keep_counting_pending(state: ServerState) -> None:
    while True:
        await _count_pending(state)
        await anyio.sleep(PENDING_REFRESH)


async def _page(request: Request) -> Response:
    page = resources.files("interlock.server") / "web" / "inbox.html"
    return Response(
        page.read_bytes(),
        media_type="text/html; charset=utf-8",
        headers={
            # Styles inline too: the graph renderer (Mermaid) styles the SVG it draws with
            # a <style> element and style attributes. Scripts still come from the server only.
            "Content-Security-Policy": (
                "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                "connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'"
            ),
            "Cache-Control": "no-store",
        },
    )


def _lifespan(state: ServerState, notifier: Any) -> Callable[[Starlette], Any]:
    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            if isinstance(state.auth, AbstractAsyncContextManager):
                # An authenticator that follows a store (StoreAuth) runs while the server does.
                await stack.enter_async_context(state.auth)
            # While serving, tokens sent in a query string are masked in uvicorn's access log.
            access = logging.getLogger(ACCESS_LOGGER)
            redact = RedactTokens(lambda v: state.auth.authenticate(f"Bearer {v}") is not None)
            access.addFilter(redact)
            stack.callback(access.removeFilter, redact)
            if notifier is not None:
                # Entered outside the task group: closing it drains queued deliveries.
                await stack.enter_async_context(notifier)
            if state.oidc is not None:
                await stack.enter_async_context(state.oidc)
            async with anyio.create_task_group() as group:
                for served in state.served.values():
                    cursor = await served.store.change_cursor()
                    group.start_soon(_follow, state, served, cursor)
                    if state.continue_runs and await served.app.continued_by() == "workers":
                        # One owner per continuation (`App.continued_by`): the workers'
                        # trigger queues one at each decision; this server only records.
                        log.info(
                            "workers continue the threads of %s after decisions; this server "
                            "leaves continuing to them",
                            served.name,
                        )
                state.metrics.runtime.attach()
                group.start_soon(_keep_counting_pending, state)
                state.runs.attach(group)
                state.ready = True
                try:
                    yield
                finally:
                    state.ready = False
                    state.runs.attach(None)
                    state.metrics.runtime.detach()
                    group.cancel_scope.cancel()

    return lifespan


async def _follow(state: ServerState, served: Served, cursor: str | None) -> None:
    """Read one store's change feed; count its events, wake the event streams and tell the
    listeners.

    One read per ``poll_interval`` (the next one at once only after a full batch), so that
    the feed's reads do not queue up beside the requests' own on the store. Events are
    converted (a read of each question) only for listeners; the streams convert the ones they
    send (`Served.events`, which keeps each conversion).
    """
    failures = 0
    while True:
        try:
            if state.listeners:
                events = await served.events(cursor, limit=FOLLOW_BATCH)
                kinds = [(event.id.partition(":")[2], event.type) for event in events]
            else:
                events = []
                kinds = await served.kinds(cursor, limit=FOLLOW_BATCH)
        except StoreClosed:
            return
        except InterlockError as exc:
            failures += 1
            log.warning("reading the change feed of %s failed (%s); retrying", served.name, exc)
            await anyio.sleep(min(5.0, state.poll_interval * 2**failures))
            continue
        failures = 0
        if kinds:
            cursor = kinds[-1][0]
            state.ticker.tick()
            for _, kind in kinds:
                state.metrics.events.labels(kind).inc()
            for event in events:
                for listener in state.listeners:
                    try:
                        await listener(event)
                    except Exception:
                        log.exception("a listener failed on event %s", event.id)
        if len(kinds) < FOLLOW_BATCH:
            await anyio.sleep(state.poll_interval)
