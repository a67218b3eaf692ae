"""Forking a thread over HTTP: the state's schema, the state at a checkpoint, and the fork.

A fork copies a thread's state at any checkpoint into a new thread, maybe with some keys
replaced (checked against the state's schema) and planned as if a node had just run; the
source thread is not changed. Only an admin forks, and only one that sees every tool (a fork
copies the whole state, tool calls included) and both threads (the source and the new one are
within its thread prefixes). Viewers read the schema and the checkpoints a fork starts from.
"""

from __future__ import annotations

import secrets
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from .._errors import (
    CheckpointCorrupt,
    CheckpointNotFound,
    GraphChanged,
    GraphDefinitionError,
    InvalidStateEdit,
    NotAuthorized,
    ThreadBusy,
)
from ._api import (
    _body,
    _path,
    _readable_thread,
    _thread_read,
    _thread_request,
    checkpoint_fields,
    read_checkpoints,
    shown_state,
)
from ._deciding import background
from ._errors import ApiError, json_response
from ._params import NewName, PathId, ThreadQuery, read_query
from ._scopes import sees_every_tool
from ._views import CheckpointFields, StateProblem

__all__ = [
    "CheckpointState",
    "ForkRequest",
    "ForkResult",
    "StateSchemaView",
    "get_checkpoint",
    "get_state_schema",
    "post_fork",
]


class StateSchemaView(msgspec.Struct, kw_only=True):
    """The JSON Schema of an app's state, and the nodes a fork may run "as"."""

    app: str
    schema: dict[str, Any]
    """An object with one property per state key (`interlock.App.state_schema`)."""
    nodes: list[str]
    """The graph's top-level nodes, in the order they were added."""


class CheckpointState(CheckpointFields, kw_only=True):
    """A thread's state at one of its checkpoints."""

    values: Any
    """The whole state; for an identity limited to some tools, without the calls of others."""


class ForkRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``POST /v1/threads/{thread}/fork``: copy the thread at a checkpoint into a new thread."""

    checkpoint_id: PathId
    """The checkpoint to fork from (``GET .../history`` lists them)."""
    new_thread: NewName | None = None
    """The new thread's id (default: ``<thread>-fork-<6 hex digits>``); it must not exist."""
    values: dict[str, Any] | None = None
    """State keys whose whole values the new thread replaces, checked against the schema."""
    as_node: PathId | None = None
    """Plan the new thread as if this node had just run (its successors next)."""
    run: bool = False
    """Continue the new thread in the background, as ``POST .../runs`` does."""
    app: str | None = None


class ForkResult(msgspec.Struct, kw_only=True):
    """A fork made (201): the new thread and where it came from."""

    thread: str
    checkpoint_id: str
    """The new thread's first checkpoint."""
    app: str
    source_thread: str
    source_checkpoint: str
    running: bool
    """Whether the new thread was set running in the background (``run``)."""


async def get_state_schema(request: Request) -> Response:
    state, identity, thread = _thread_read(request)
    query = read_query(request, ThreadQuery)
    served = await _readable_thread(state, identity, thread, query.app)
    app = served.app
    return json_response(
        StateSchemaView(app=served.name, schema=app.state_schema(), nodes=list(app.plan.nodes))
    )


async def get_checkpoint(request: Request) -> Response:
    state, identity, thread = _thread_read(request)
    checkpoint = _path(request, "checkpoint")
    query = read_query(request, ThreadQuery)
    served = await _readable_thread(state, identity, thread, query.app)
    snapshot = await read_checkpoints(served.app.get_state(thread, checkpoint))
    return json_response(
        CheckpointState(
            **checkpoint_fields(snapshot),
            values=shown_state(snapshot.values, identity),
        )
    )


async def post_fork(request: Request) -> Response:
    state, identity, thread = _thread_request(request, "admin")
    body = await _body(request, ForkRequest)
    if not sees_every_tool(identity):
        raise ApiError(
            403,
            "out_of_scope",
            f"{identity.name} sees the questions of some tools only, and a fork copies the "
            "whole state (every tool's calls); ask an admin who sees every tool to fork it",
        )
    new_thread = body.new_thread or f"{thread}-fork-{secrets.token_hex(3)}"
    if not identity.sees_thread(new_thread):
        raise ApiError(
            403,
            "out_of_scope",
            f"{identity.name} may act only on threads starting with "
            f"{sorted(identity.threads)}; name a new_thread within them",
        )
    served = await _readable_thread(state, identity, thread, body.app)
    app = served.app
    # What the request refers to first (404), then what it asks (409, 422): a request the
    # document allows is refused as malformed only once it names what exists.
    if await served.store.get_checkpoint(thread, body.checkpoint_id) is None:
        raise ApiError(
            404,
            "unknown_checkpoint",
            f"thread {thread!r} has no checkpoint {body.checkpoint_id!r}; GET .../history "
            "lists them",
        )
    if body.as_node is not None and body.as_node not in app.plan.nodes:
        raise ApiError(
            422,
            "unknown_node",
            f"as_node {body.as_node!r} is not a node of {served.name}; its nodes: "
            f"{list(app.plan.nodes)} (GET .../schema lists them)",
        )
    exists = ApiError(
        409, "thread_exists", f"thread {new_thread!r} exists already; name another new_thread"
    )
    if await served.store.get_thread(new_thread) is not None:
        raise exists
    try:
        checkpoint = await app.fork(
            thread,
            body.checkpoint_id,
            new_thread,
            values=body.values,
            as_node=body.as_node,
            actor=identity.name,
            principal=identity.principal(),
        )
    except CheckpointNotFound as exc:
        raise ApiError(404, "unknown_checkpoint", str(exc)) from exc
    except InvalidStateEdit as exc:
        problems = [StateProblem(path=path, message=message) for path, message in exc.problems]
        raise ApiError(422, "invalid_state", str(exc), problems=problems) from exc
    except NotAuthorized as exc:
        raise ApiError(403, "forbidden", str(exc)) from exc
    except (ThreadBusy, GraphDefinitionError) as exc:
        # The node and the new id were checked above: what is left is a thread made with
        # that id in between (the store's compare-and-set, or the runtime's own check).
        raise exists from exc
    except CheckpointCorrupt as exc:
        raise ApiError(500, "damaged_record", f"{exc}; restore the store from a backup") from exc
    except GraphChanged as exc:
        raise ApiError(409, "graph_changed", str(exc)) from exc
    running = False
    if body.run:
        metadata = {"started_by": identity.name}
        running = background(
            state, lambda: app.resume(new_thread, metadata=metadata), new_thread, app
        )
    return json_response(
        ForkResult(
            thread=new_thread,
            checkpoint_id=checkpoint,
            app=served.name,
            source_thread=thread,
            source_checkpoint=body.checkpoint_id,
            running=running,
        ),
        201,
    )
