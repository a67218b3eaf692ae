"""The ``/v1`` handlers: the inbox, decisions, threads, runs, pauses and the event stream.

Every handler authenticates first, then checks the role and the scopes, then reads or acts
through `App`. Nothing a GET does changes anything. A decision's actor is the authenticated
identity; the client cannot name another.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Coroutine, Mapping
from typing import Any, Final, Literal, TypeVar

import anyio
import msgspec
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from .._args import check_id, check_name
from .._errors import (
    CheckpointCorrupt,
    CheckpointNotFound,
    GraphChanged,
    InterlockError,
    InvalidUpdate,
    RunError,
    StoreClosed,
    ThreadBusy,
    ThreadInterrupted,
)
from ..runtime import Interrupt, StateSnapshot, Tally, usage_of
from ..stores import InterruptRecord, PendingFilter
from ._auth import Identity, Role
from ._deciding import background, decide_as, find_question
from ._errors import ApiError, json_response
from ._events import EVENT_TYPES, FAILED_SUMMARY, ServerEvent
from ._params import (
    MAX_PAGE,
    AuditQuery,
    DeliveriesQuery,
    EventsQuery,
    HistoryQuery,
    InboxQuery,
    InterruptsQuery,
    ThreadQuery,
    ThreadsQuery,
    check_declared,
    read_query,
)
from ._scopes import (
    opaque,
    reads_failures,
    sees_every_tool,
    strip_calls,
    visible_audit,
    visible_event,
)
from ._served import Served
from ._signin import authenticate
from ._state import ServerState
from ._store_auth import StoreAuth
from ._views import (
    AuditItem,
    AuditPage,
    CheckpointItem,
    DecisionRequest,
    DecisionResult,
    DeliveryItem,
    DeliveryPage,
    HistoryPage,
    IdentityView,
    InterruptCounts,
    InterruptDetail,
    InterruptPage,
    InterruptView,
    PauseAccepted,
    PauseRequest,
    RunAccepted,
    RunRequest,
    TallyView,
    ThreadItem,
    ThreadPage,
    ThreadView,
    ToolCount,
    UsageView,
    decision_body,
    plain,
)

__all__ = [
    "count_interrupts",
    "get_audit",
    "get_deliveries",
    "get_events",
    "get_history",
    "get_interrupt",
    "get_me",
    "get_thread",
    "list_interrupts",
    "list_threads",
    "post_decision",
    "post_pause",
    "post_run",
]

log = logging.getLogger("interlock.server")

T = TypeVar("T")

_MAX_PAGE: Final = MAX_PAGE
_RECENT_MESSAGES: Final = 20
MAX_BODY_DEPTH: Final = 64
"""The deepest nesting of arrays and objects a request body may have (the body's own object is
1 deep). A store's codec keeps at most 100 levels of a value, of which the records around an
answer or an input take some; a deeper body is refused (400) before anything reads it."""


# -- plumbing ------------------------------------------------------------------------------------


def _state(request: Request) -> ServerState:
    state: ServerState = request.app.state.interlock
    return state


def _identity(request: Request, role: Role) -> Identity:
    state = _state(request)
    identity = authenticate(request, state)
    if identity is None:
        where = (
            "made with `interlock token create PRINCIPAL` (a token that is revoked or expired, "
            "or whose principal is disabled, is refused)"
            if isinstance(state.auth, StoreAuth)
            else "from the server's tokens file; tokens are read when the server starts, so "
            "restart it after editing the tokens file"
        )
        raise ApiError(
            401,
            "unauthenticated",
            f"token not recognised: send 'Authorization: Bearer <token>' with a token {where}",
            headers={"WWW-Authenticate": 'Bearer realm="interlock"'},
        )
    if not identity.can(role):
        raise ApiError(
            403,
            "forbidden",
            f"{identity.name} is a {identity.role}; this needs the {role} role",
        )
    return identity


def _check_text(value: str, name: str) -> None:
    try:
        check_id(value, name)
    except ValueError as exc:
        raise ApiError(400, "bad_parameter", str(exc)) from exc


def _path(request: Request, name: str) -> str:
    value: str = request.path_params[name]
    _check_text(value, name)
    return value


async def _body(request: Request, kind: type[T]) -> T:
    check_declared(request, kind, "body")
    raw = await request.body()
    if not raw.strip():
        raw = b"{}"
    # Parsed as plain JSON first: its depth is checked before the body's type is, so a deep
    # body is refused the same way on every route, whatever its fields.
    try:
        data = msgspec.json.decode(raw)
    except RecursionError:
        data = None
        deep = True
    except msgspec.DecodeError as exc:
        raise ApiError(422, "invalid_body", f"the request body is not JSON: {exc}") from exc
    else:
        deep = _deeper_than(data, MAX_BODY_DEPTH)
    if deep:
        raise ApiError(
            400,
            "too_deep",
            f"the request body nests arrays and objects more than {MAX_BODY_DEPTH} deep; "
            "send a flatter value",
        )
    try:
        return msgspec.convert(data, type=kind)
    except msgspec.ValidationError as exc:
        raise ApiError(422, "invalid_body", f"the request body is not valid: {exc}") from exc


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` (parsed JSON) nests lists and dicts more than ``limit`` deep."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _b64(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def _unb64(text: str, name: str) -> Any:
    try:
        return json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError) as exc:
        raise ApiError(
            400, "bad_parameter", f"{name} is not a cursor this server gave out; start over"
        ) from exc


def _tool_of(interrupt: Interrupt) -> str | None:
    return next((s.name for s in reversed(interrupt.address) if s.kind == "tool"), None)


def _served_for(state: ServerState, name: str | None) -> Served:
    if name is None:
        if len(state.served) == 1:
            return next(iter(state.served.values()))
        raise ApiError(400, "app_required", f"name the app: one of {sorted(state.served)}")
    found = state.served.get(name)
    if found is None:
        raise ApiError(404, "unknown_app", f"no app {name!r}; served: {sorted(state.served)}")
    return found


async def _thread_served(state: ServerState, thread: str, name: str | None) -> Served:
    """The served app that has ``thread`` (the named one, or the one whose store has it)."""
    if name is not None:
        return _served_for(state, name)
    for served in state.served.values():
        if await served.store.get_thread(thread) is not None:
            return served
    raise _unknown_thread(thread)


async def _readable_thread(
    state: ServerState, identity: Identity, thread: str, name: str | None
) -> Served:
    """The served app (the named one, or any) whose store has ``thread``, in ``identity``'s
    scope; one outside its prefixes is answered as an unknown thread is (the same 404)."""
    apps = [_served_for(state, name)] if name is not None else list(state.served.values())
    if identity.sees_thread(thread):
        for served in apps:
            if await served.store.get_thread(thread) is not None:
                return served
    raise _unknown_thread(thread)


def _unknown_thread(thread: str) -> ApiError:
    return ApiError(404, "unknown_thread", f"no thread {thread!r}; start it with POST .../runs")


# -- the inbox -----------------------------------------------------------------------------------


def _inbox_filters(query: InboxQuery) -> dict[str, Any]:
    """The inbox's filters from the query, as `App.inbox` takes them."""
    age = query.older_than
    return {
        "thread": query.thread,
        "tool": query.tool,
        "key": query.key,
        "older_than": None if age is None else time.time() - age,
        "deadline_before": query.deadline_before,
    }


async def list_interrupts(request: Request) -> Response:
    state = _state(request)
    identity = _identity(request, "viewer")
    query = read_query(request, InterruptsQuery)
    limit = query.limit
    where = _inbox_filters(query)
    after = query.after
    named = query.app
    apps = [_served_for(state, named).name] if named is not None else sorted(state.served)
    # The cursor is each app's last listed interrupt: the page is the oldest ``limit`` of
    # every app's next ones, merged by time, so a new question of any app is reached.
    cursors: dict[str, str | None] = dict.fromkeys(apps)
    if after is not None:
        decoded = _unb64(after, "after")
        if not isinstance(decoded, dict) or not set(decoded) <= set(apps):
            raise ApiError(400, "bad_parameter", "after is not a cursor of this listing")
        if not all(v is None or isinstance(v, str) for v in decoded.values()):
            raise ApiError(400, "bad_parameter", "after is not a cursor of this listing")
        for value in decoded.values():
            if value is not None:
                _check_text(value, "after")
        cursors.update(decoded)
    candidates: list[tuple[float, str, str, InterruptView]] = []
    scanned: dict[str, str | None] = {}
    more = False
    for name in apps:
        found, scanned[name], exhausted = await _visible_page(
            state.served[name], identity, where, cursors[name], limit
        )
        more = more or not exhausted
        candidates += [(v.created_at, v.id, name, v) for v in found]
    candidates.sort(key=lambda c: (c[0], c[1]))
    page, rest = candidates[:limit], candidates[limit:]
    for _, interrupt_id, name, _ in page:
        cursors[name] = interrupt_id
    for name in apps:
        if not any(c[2] == name for c in rest):
            # Everything this app's scan found is on the page (or it found nothing it may
            # show): the next page goes on from where the scan stopped.
            cursors[name] = scanned[name]
    more = more or bool(rest)
    items = [view for *_, view in page]
    return json_response(InterruptPage(items=items, next=_b64(cursors) if more else None))


async def count_interrupts(request: Request) -> Response:
    """The inbox's filters, counted per tool through each app's index.

    Tools outside the identity's scope are left out. The index counts all threads or one, not
    a prefix, so an identity limited to some thread prefixes must name a thread: one within
    its scope is counted, one outside counts nothing, and none at all is refused with 403.
    """
    state = _state(request)
    identity = _identity(request, "viewer")
    query = read_query(request, InboxQuery)
    where = _inbox_filters(query)
    thread, tool = where["thread"], where["tool"]
    named = query.app
    apps = [_served_for(state, named)] if named is not None else list(state.served.values())
    if thread is None and "" not in identity.threads:
        raise ApiError(
            403,
            "forbidden",
            f"{identity.name} sees only threads starting with {sorted(identity.threads)}; "
            "counts need an identity whose thread scope is all threads, or a thread= "
            "within its scope",
        )
    counts: dict[str | None, int] = {}
    if (thread is None or identity.sees_thread(thread)) and (
        tool is None or identity.sees_tool(tool)
    ):
        for served in apps:
            found = await served.app.inbox_counts(**where)
            for name, pending in found.items():
                if identity.sees_tool(name):
                    counts[name] = counts.get(name, 0) + pending
    by_tool = [
        ToolCount(tool=name, pending=counts[name])
        for name in sorted(counts, key=lambda n: (n is None, n or ""))
    ]
    return json_response(InterruptCounts(by_tool=by_tool, total=sum(counts.values())))


async def _visible_page(
    served: Served, identity: Identity, where: dict[str, Any], after: str | None, limit: int
) -> tuple[list[InterruptView], str | None, bool]:
    """Up to ``limit`` interrupts of one app after ``after`` that ``identity`` may see; the
    last one scanned; whether the app has none after it (at most 20 store pages are read)."""
    found: list[InterruptView] = []
    for _ in range(20):
        batch = await served.app.inbox(**where, limit=limit, after=after)
        for interrupt in batch:
            after = interrupt.id
            tool = _tool_of(interrupt)
            if identity.sees(interrupt.thread, tool):
                found.append(served.view(interrupt, tool))
                if len(found) == limit:
                    return found, after, False
        if len(batch) < limit:
            return found, after, True
    return found, after, False


async def get_interrupt(request: Request) -> Response:
    state = _state(request)
    identity = _identity(request, "viewer")
    served, question = await find_question(state, identity, _path(request, "id"))
    row, interrupt, decided = question.record, question.interrupt, question.decision
    status: str | None = None
    values: Any = None
    messages: list[Any] = []
    try:
        snapshot = await served.app.get_state(row.thread)
        status = snapshot.status
        values, messages = _context(snapshot.values, identity)
    except (CheckpointNotFound, CheckpointCorrupt):
        pass
    trail = [a for a in await _audit(served, row.thread, None, 1000) if _concerns(a, interrupt.id)]
    audit = await visible_audit(identity, trail, served.row)
    detail = InterruptDetail(
        started_by=question.started_by,
        interrupt=served.view(interrupt, row.tool),
        decision=decision_body(decided) if decided is not None else None,
        thread_status=status,
        messages=messages,
        values=values,
        audit=audit,
    )
    return json_response(detail)


def _decoded(served: Served, row: InterruptRecord) -> Interrupt:
    try:
        return served.interrupt(row)
    except CheckpointCorrupt as exc:
        raise ApiError(500, "damaged_record", f"{exc}; restore the store from a backup") from exc


def _concerns(entry: AuditItem, interrupt_id: str) -> bool:
    data = entry.data
    if not isinstance(data, dict):
        return False
    return data.get("interrupt") == interrupt_id or interrupt_id in (data.get("interrupts") or ())


def shown_state(values: dict[str, Any], identity: Identity) -> Any:
    """A whole state as ``identity`` may read it, as JSON: for an identity limited to some
    tools, without the calls of the others (and their answers)."""
    if sees_every_tool(identity):
        return plain(values)
    return strip_calls(identity, plain(values, unknown=opaque))


def _context(values: dict[str, Any], identity: Identity) -> tuple[Any, list[Any]]:
    """A thread's state besides its messages, and its recent messages, as ``identity`` may
    read them (without the calls of tools outside its scope)."""
    if not sees_every_tool(identity):
        # The whole state at once: a call may be outside the recent messages, its answer in.
        shown = shown_state(values, identity)
        if not isinstance(shown, dict):
            return shown, []
        values = shown
    rest = {k: v for k, v in values.items() if k != "messages"}
    messages = values.get("messages")
    recent = list(messages[-_RECENT_MESSAGES:]) if isinstance(messages, list) else []
    return plain(rest), [plain(m) for m in recent]


# -- decisions -----------------------------------------------------------------------------------


def _nonce(identity: Identity, key: str, body: bytes) -> str:
    """The nonce a decision is recorded with: who and which key, then which body."""
    who = hashlib.sha256(f"{identity.name}\0{key}".encode(errors="surrogatepass")).hexdigest()
    what = hashlib.sha256(body).hexdigest()
    return f"{who[:24]}.{what[:16]}"


async def post_decision(request: Request) -> Response:
    state = _state(request)
    identity = _identity(request, "approver")
    interrupt_id = _path(request, "id")
    key = request.headers.get("idempotency-key", "")
    if not key or len(key) > 200 or not key.isprintable():
        raise ApiError(
            400,
            "idempotency_key_required",
            "send an Idempotency-Key header (1-200 printable characters, new for each "
            "decision) so that a retried request is not taken for a second decision",
        )
    raw = await request.body()
    body = await _body(request, DecisionRequest)
    decided = await decide_as(
        state,
        identity,
        interrupt_id,
        body.answer,
        nonce=_nonce(identity, key, raw),
        payload_hash=body.payload_hash,
        reason=body.reason,
        override=body.override,
        confirmed=body.confirmed,
        wait=body.wait,
    )
    view: ThreadView | None = None
    if body.wait and not decided.replayed and decided.decision.final:
        view = await _thread_view(decided.served, decided.decision.thread, identity)
    result = DecisionResult(
        decision=decision_body(decided.decision),
        replayed=decided.replayed,
        continued=decided.continued,
        thread_view=view,
    )
    return json_response(result, 200 if decided.replayed else 201)


# -- threads -------------------------------------------------------------------------------------


def _thread_request(request: Request, role: Role) -> tuple[ServerState, Identity, str]:
    """The server, the caller (with ``role``) and the thread in the path (in its scope).

    For the routes that act on a thread: one outside the caller's prefixes is refused (403)
    before anything is read, so the answer is the same whether the thread exists or not.
    """
    identity = _identity(request, role)
    thread = _path(request, "thread")
    if not identity.sees_thread(thread):
        raise ApiError(
            403,
            "out_of_scope",
            f"{identity.name} may act only on threads starting with "
            f"{sorted(identity.threads)}; ask an admin to widen the identity's scopes",
        )
    return _state(request), identity, thread


def _thread_read(request: Request) -> tuple[ServerState, Identity, str]:
    """The server, the caller (a viewer at least) and the thread in the path, for the routes
    that read a thread (`_readable_thread` answers one outside the scope as unknown)."""
    return _state(request), _identity(request, "viewer"), _path(request, "thread")


async def get_thread(request: Request) -> Response:
    state, identity, thread = _thread_read(request)
    app = read_query(request, ThreadQuery).app
    served = await _readable_thread(state, identity, thread, app)
    return json_response(await _thread_view(served, thread, identity))


async def get_history(request: Request) -> Response:
    state, identity, thread = _thread_read(request)
    query = read_query(request, HistoryQuery)
    served = await _readable_thread(state, identity, thread, query.app)
    limit = query.limit
    try:
        snapshots = await served.app.history(thread, limit=limit, before=query.before)
    except CheckpointNotFound as exc:
        raise ApiError(404, "unknown_checkpoint", f"{exc}") from exc
    items = [
        CheckpointItem(
            **checkpoint_fields(s),
            metadata=_metadata(s.metadata, identity),
        )
        for s in snapshots
    ]
    more = items[-1].checkpoint_id if len(items) == limit else None
    return json_response(HistoryPage(items=items, next=more))


async def read_checkpoints(reading: Awaitable[T]) -> T:
    """Await a read of checkpoints; a checkpoint the thread does not have is a 404."""
    try:
        return await reading
    except CheckpointNotFound as exc:
        raise ApiError(
            404,
            "unknown_checkpoint",
            f"{exc}; list the thread's checkpoints with GET .../history or .../timeline",
        ) from exc
    except CheckpointCorrupt as exc:
        raise ApiError(500, "damaged_record", f"{exc}; restore the store from a backup") from exc
    except GraphChanged as exc:
        raise ApiError(
            409,
            "graph_changed",
            f"{exc}; serve the graph that wrote the thread to read its states",
        ) from exc


def checkpoint_fields(s: StateSnapshot[Any]) -> dict[str, Any]:
    """The fields every view of one checkpoint shows, read from its snapshot."""
    return {
        "checkpoint_id": s.checkpoint_id,
        "parent_id": s.parent_id,
        "step": s.step,
        "status": s.status,
        "source": s.source,
        "created_at": s.created_at,
        "next": list(s.next),
    }


def _metadata(metadata: dict[str, Any], identity: Identity) -> Any:
    """A checkpoint's metadata as ``identity`` may read it: a failure's reason only if it
    reads failures (any tool's call may be quoted there), the model usage only if it sees
    every tool (the calls and tokens count the work of tools outside a scope)."""
    if reads_failures(identity):
        return plain(metadata)
    hidden = ("error", "usage")
    return plain({k: v for k, v in metadata.items() if k not in hidden}, unknown=opaque)


async def _audit(served: Served, thread: str, after: int | None, limit: int) -> list[AuditItem]:
    rows = await served.store.audit_log(
        thread=thread, after=None if after is None else (thread, after), limit=limit
    )
    out = []
    for r in rows:
        try:
            data = json.loads(r.data)
        except ValueError:
            data = r.data.decode(errors="replace")
        out.append(AuditItem(seq=r.seq, at=r.at, kind=r.kind, actor=r.actor, data=data))
    return out


async def get_audit(request: Request) -> Response:
    state, identity, thread = _thread_read(request)
    query = read_query(request, AuditQuery)
    served = await _readable_thread(state, identity, thread, query.app)
    after = query.after
    items, more = await _audit_page(
        served, identity, thread, None if after is None else int(after), query.limit
    )
    return json_response(AuditPage(items=items, next=more))


async def _audit_page(
    served: Served, identity: Identity, thread: str, after: int | None, limit: int
) -> tuple[list[AuditItem], int | None]:
    """Up to ``limit`` entries after ``after`` that ``identity`` may read, and the position
    to go on from (None: the log ends there); at most 20 store pages are read."""
    items: list[AuditItem] = []
    for _ in range(20):
        page = await _audit(served, thread, after, limit)
        items += await visible_audit(identity, page, served.row)
        if len(items) >= limit:
            items = items[:limit]
            return items, items[-1].seq
        if len(page) < limit:
            return items, None
        after = page[-1].seq
    return items, after


# -- runs and pauses -----------------------------------------------------------------------------


async def post_run(request: Request) -> Response:
    state, identity, thread = _thread_request(request, "approver")
    body = await _body(request, RunRequest)
    if body.input is not None:
        # New input may start a thread: its id is held to the rule for new names.
        try:
            check_name(thread, "thread")
        except ValueError as exc:
            raise ApiError(400, "bad_parameter", str(exc)) from exc
    served = _served_for(state, body.app) if body.app or len(state.served) == 1 else None
    if served is None:
        served = await _thread_served(state, thread, None)
    action: Literal["run", "continue"] = "run" if body.input is not None else "continue"
    if action == "continue" or not body.wait:
        # New input run here and now needs no read first: the run itself refuses a thread
        # that waits on decisions (ThreadInterrupted, below) before it records anything.
        record = await served.store.get_thread(thread)
        if action == "continue" and record is None:
            raise ApiError(404, "unknown_thread", f"no thread {thread!r}; send input to start it")
        if action == "run" and record is not None and record.status == "interrupted":
            raise _interrupted(thread)
    metadata = {"started_by": identity.name}
    app = served.app

    def call() -> Coroutine[Any, Any, Any]:
        if action == "run":
            return app.run(body.input, thread=thread, metadata=metadata)
        return app.resume(thread, metadata=metadata)

    if action == "run":
        _check_input(served, body.input)
    if body.wait:
        try:
            await call()
        except ThreadBusy as exc:
            raise ApiError(409, "thread_busy", f"{exc}; try again once it stops") from exc
        except ThreadInterrupted as exc:
            raise _interrupted(thread) from exc
        except RunError as exc:
            # The run failed in a node: its thread says so (status "failed"), as the answer.
            log.info("run of thread %r failed: %s", thread, exc)
        except InterlockError as exc:
            raise ApiError(409, "run_refused", str(exc)) from exc
        view = await _thread_view(served, thread, identity)
        return json_response(
            RunAccepted(thread=thread, app=served.name, action=action, thread_view=view)
        )
    if not background(state, call, thread, app):
        raise ApiError(
            409, "thread_busy", f"a run of {thread!r} is already going on in this server"
        )
    return json_response(RunAccepted(thread=thread, app=served.name, action=action), 202)


def _interrupted(thread: str) -> ApiError:
    """The refusal of new input on a thread that waits on decisions."""
    return ApiError(
        409,
        "thread_interrupted",
        f"thread {thread!r} waits on decisions; decide them (GET /v1/interrupts?thread=...) "
        "before sending new input",
    )


def _check_input(served: Served, value: Any) -> None:
    """Refuse new input the state cannot take (its shape and keys; nodes check the rest)."""
    schema = served.app.plan.schema
    try:
        keys = set(schema.values_of(value))
    except InvalidUpdate as exc:
        raise ApiError(422, "invalid_input", f"{exc}; send an object of state keys") from exc
    unknown = sorted(keys - schema.names)
    if unknown:
        raise ApiError(
            422,
            "invalid_input",
            f"the state of {served.name} has no key {unknown[0]!r}; its keys are "
            f"{sorted(schema.names)}",
        )


async def _thread_view(served: Served, thread: str, identity: Identity) -> ThreadView:
    """The thread's latest state, with the interrupts ``identity`` may see."""
    try:
        snapshot = await served.app.get_state(thread)
    except CheckpointNotFound as exc:
        raise ApiError(404, "unknown_thread", f"no thread {thread!r}") from exc
    except CheckpointCorrupt as exc:
        raise ApiError(500, "damaged_record", f"{exc}; restore the store from a backup") from exc
    except GraphChanged as exc:
        # Written by another graph: its state cannot be read here, its record can.
        return await _unreadable_view(served, thread, identity, exc)
    values, messages = _context(snapshot.values, identity)
    error = command = None
    if snapshot.status == "failed":
        error, command = await served.failure(thread, snapshot.checkpoint_id)
        error = error if reads_failures(identity) else None
    return ThreadView(
        error=error,
        continue_with=command,
        thread=thread,
        app=served.name,
        status=snapshot.status,
        checkpoint_id=snapshot.checkpoint_id,
        step=snapshot.step,
        updated_at=snapshot.created_at,
        next=list(snapshot.next),
        interrupts=[
            served.view(i, tool)
            for i in snapshot.interrupts
            if identity.sees_tool(tool := _tool_of(i))
        ],
        values=values,
        messages=messages,
        usage=usage_view(snapshot.metadata) if sees_every_tool(identity) else None,
    )


def usage_view(metadata: Mapping[str, Any]) -> UsageView | None:
    """The usage totals a checkpoint's metadata holds, as the API shows them (None when it
    holds none, or only a running time: a checkpoint in the middle of a run)."""
    if not isinstance(metadata.get("usage"), Mapping):
        return None
    totals = usage_of(metadata)

    def tally(t: Tally) -> TallyView:
        return TallyView(
            input_tokens=t.input_tokens,
            output_tokens=t.output_tokens,
            cached_tokens=t.cached_tokens,
            calls=t.calls,
            cost=t.cost,
        )

    return UsageView(
        thread=tally(totals.thread),
        run=tally(totals.run),
        run_seconds=round(totals.run_seconds, 3),
        models={name: tally(t) for name, t in totals.models.items()},
    )


async def _unreadable_view(
    served: Served, thread: str, identity: Identity, exc: GraphChanged
) -> ThreadView:
    """The view of a thread this App's graph cannot read: its record, its questions, and why."""
    head = await served.store.get_checkpoint(thread)
    if head is None:
        raise ApiError(404, "unknown_thread", f"no thread {thread!r}")
    error, command = await served.failure(thread, head.id)
    if not reads_failures(identity):
        error = None
    rows = await served.store.pending(PendingFilter(thread=thread), limit=_MAX_PAGE)
    return ThreadView(
        thread=thread,
        app=served.name,
        status=head.status,
        checkpoint_id=head.id,
        step=head.step,
        updated_at=head.created_at,
        next=[],
        interrupts=[
            served.view(_decoded(served, row), row.tool)
            for row in rows
            if identity.sees_tool(row.tool)
        ],
        values=None,
        messages=[],
        error=error or f"{type(exc).__name__}: {exc}",
        continue_with=command,
    )


async def list_threads(request: Request) -> Response:
    state = _state(request)
    identity = _identity(request, "viewer")
    query = read_query(request, ThreadsQuery)
    limit = query.limit
    named = query.app
    apps = [_served_for(state, named).name] if named is not None else sorted(state.served)
    # The cursor is the app and thread listed last: apps in name order, each app's by id.
    start: list[Any] = [apps[0], None]
    after = query.after
    if after is not None:
        start = _unb64(after, "after")
        if not (isinstance(start, list) and len(start) == 2 and start[0] in apps):
            raise ApiError(400, "bad_parameter", "after is not a cursor of this listing")
        if not (start[1] is None or isinstance(start[1], str)):
            raise ApiError(400, "bad_parameter", "after is not a cursor of this listing")
    items: list[ThreadItem] = []
    for name in apps[apps.index(start[0]) :]:
        served = state.served[name]
        cursor: str | None = start[1] if name == start[0] else None
        while len(items) < limit:
            batch = await served.app.threads(status=query.status, limit=limit, after=cursor)
            for summary in batch:
                cursor = summary.thread
                if not identity.sees_thread(summary.thread):
                    continue
                items.append(
                    ThreadItem(
                        thread=summary.thread,
                        app=name,
                        status=summary.status,
                        checkpoint_id=summary.record.head_id,
                        updated_at=summary.record.updated_at,
                        error=summary.error if reads_failures(identity) else None,
                        continue_with=summary.continue_with,
                    )
                )
                if len(items) == limit:
                    return json_response(ThreadPage(items=items, next=_b64([name, cursor])))
            if len(batch) < limit:
                break
    return json_response(ThreadPage(items=items, next=None))


async def post_pause(request: Request) -> Response:
    state, _, thread = _thread_request(request, "admin")
    body = await _body(request, PauseRequest)
    served = await _thread_served(state, thread, read_query(request, ThreadQuery).app)
    if not await served.app.request_pause(thread, forced=body.forced):
        raise ApiError(404, "unknown_thread", f"no thread {thread!r}")
    return json_response(PauseAccepted(thread=thread, forced=body.forced), 202)


async def get_me(request: Request) -> Response:
    state = _state(request)
    identity = _identity(request, "viewer")
    view = IdentityView(
        name=identity.name,
        role=identity.role,
        tools=list(identity.tools),
        threads=list(identity.threads),
        four_eyes=state.four_eyes,
    )
    return json_response(view)


async def get_deliveries(request: Request) -> Response:
    state = _state(request)
    identity = _identity(request, "admin")
    query = read_query(request, DeliveriesQuery)
    limit = query.limit
    event_id = query.event_id
    log = getattr(state.notifier, "log", None)
    # The deliveries of the events the identity's scopes hide are left out, as the events are.
    found = [] if log is None else log.entries(event_id=event_id)
    records = [r for r in found if visible_event(identity, r.event_type, r.thread, r.tool)]
    records = records[len(records) - limit :] if limit else []
    # A receiver's answer may quote the event it was sent, a run's failure reason included.
    failures = reads_failures(identity)
    items = [
        DeliveryItem(
            event_id=r.event_id,
            event_type=r.event_type,
            channel=r.channel,
            attempt=r.attempt,
            at=r.at,
            outcome=r.outcome,
            status=r.status,
            error=r.error if failures or r.event_type != "run.failed" else None,
            elapsed_ms=r.elapsed_ms,
        )
        for r in records
    ]
    return json_response(DeliveryPage(items=items))


# -- the event stream ----------------------------------------------------------------------------


async def get_events(request: Request) -> Response:
    state = _state(request)
    identity = _identity(request, "viewer")
    query = read_query(request, EventsQuery)
    wanted: set[str] = set(EVENT_TYPES)
    types = query.types
    if types is not None:
        # Each one is an event type: the query's pattern holds them to EVENT_TYPES.
        wanted = {t.strip() for t in types.split(",") if t.strip()}
    last = request.headers.get("last-event-id") or query.last_event_id
    if last:
        decoded = _unb64(last, "Last-Event-ID")
        if not isinstance(decoded, dict) or not all(isinstance(v, str) for v in decoded.values()):
            raise ApiError(400, "bad_parameter", "Last-Event-ID is not an id this server sent")
        position: dict[str, str | None] = {n: decoded.get(n) for n in state.served}
    else:
        position = {n: await s.store.change_cursor() for n, s in state.served.items()}
    for name, cursor in position.items():
        if cursor is not None:
            try:
                await state.served[name].store.changes(after=cursor, limit=1)
            except ValueError as exc:
                raise ApiError(400, "bad_parameter", f"Last-Event-ID: {exc}") from exc
    stream = _stream(state, identity, position, wanted)
    return StreamingResponse(
        stream,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


def _shown(identity: Identity, event: ServerEvent) -> ServerEvent | None:
    """``event`` as ``identity`` may read it: None outside its scopes, a run's failure
    without its reason unless it reads failures."""
    if not visible_event(identity, event.type, event.thread, event.tool):
        return None
    if event.type == "run.failed" and not reads_failures(identity):
        return msgspec.structs.replace(event, summary=FAILED_SUMMARY)
    return event


async def _stream(
    state: ServerState,
    identity: Identity,
    position: dict[str, str | None],
    wanted: set[str],
) -> AsyncIterator[bytes]:
    state.metrics.sse_clients.inc()
    try:
        yield b"retry: 2000\n: connected\n\n"
        while True:
            tick = state.ticker.current()
            sent = False
            for name, served in state.served.items():
                try:
                    events = await served.events(position[name])
                except StoreClosed:
                    return
                for event in events:
                    position[name] = event.id.partition(":")[2]
                    shown = _shown(identity, event) if event.type in wanted else None
                    if shown is not None:
                        sent = True
                        yield _frame(shown, _b64(position))
            if sent:
                continue
            with anyio.move_on_after(state.heartbeat) as waited:
                await tick.wait()
            if waited.cancelled_caught:
                yield b": ping\n\n"
    finally:
        state.metrics.sse_clients.dec()


def _frame(event: ServerEvent, position: str) -> bytes:
    data = msgspec.json.encode(event)
    return b"id: %s\nevent: %s\ndata: %s\n\n" % (position.encode(), event.type.encode(), data)
