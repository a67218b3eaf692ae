"""The picture of a graph, and where one of its threads stands: ``/v1/graph`` and
``/v1/threads/{thread}/graph``; and the renderer the web page draws it with, Mermaid's browser
build, shipped in the package (``web/vendor/``) and served at ``/web/vendor/mermaid.min.js``.

A thread's position is read from its latest checkpoint and the checkpoints of its current run,
and given as marks on the nodes of the drawing (`App.draw`), keyed by node path:

- ``waiting``: the node of each pending interrupt (its whole path, from the interrupt's
  address: `node_path`), and every block on the way to it;
- ``failed``: the next nodes of a failed thread;
- ``next``: the other next nodes;
- ``done``: the nodes that ran in the current run, since the latest checkpoint written for new
  input (``source == "input"``).

An identity with a tool scope sees neither the tools outside it in the drawing nor the
questions asked on the way through them in the marks; one limited to thread prefixes reads the
graph of its threads only, not an app's (403), as it counts the inbox only by thread.
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Callable, Iterable, Mapping
from importlib import resources
from typing import Any, Final

import anyio
import msgspec
from starlette.requests import Request
from starlette.responses import Response

from .._errors import CheckpointCorrupt, CheckpointNotFound, GraphChanged
from ..graph import Mark, node_path
from ..runtime import App, Interrupt, StateSnapshot
from ..stores import PendingFilter
from ._api import _identity, _path, _readable_thread, _served_for, _state
from ._errors import ApiError, json_response
from ._params import MAX_PAGE, ThreadQuery, read_query
from ._served import Served

__all__ = [
    "HISTORY_PAGE",
    "MAX_WALK",
    "MERMAID_VERSION",
    "AppGraph",
    "ThreadGraph",
    "get_app_graph",
    "get_thread_graph",
    "mermaid_script",
    "position",
    "ran_in_run",
]

HISTORY_PAGE: Final = 50
"""Checkpoints read per page while looking back for the start of the current run."""
MAX_WALK: Final = 500
"""The most checkpoints read back: a longer run shows as done only what ran in its last ones."""


class ThreadGraph(msgspec.Struct, kw_only=True):
    """A thread's graph as Mermaid text, with where the thread stands marked on it."""

    app: str
    """The app the thread belongs to."""
    thread: str
    """The thread."""
    status: str
    """The thread's status: ``ready``, ``interrupted``, ``paused``, ``done`` or ``failed``."""
    mermaid: str
    """The drawing (`App.draw`), each marked node with its mark's class."""
    marks: dict[str, str]
    """Node path (``"agent"``, ``"supervisor/researcher/tools"``) → ``waiting``, ``done``,
    ``failed`` or ``next``."""


class AppGraph(msgspec.Struct, kw_only=True):
    """An app's graph as Mermaid text."""

    app: str
    """The app."""
    mermaid: str
    """The drawing (`App.draw`)."""


# -- the position of a thread --------------------------------------------------------------------


async def ran_in_run(app: App[Any], thread: str) -> set[str]:
    """The nodes that ran in the thread's current run.

    Reads the checkpoints back, ``HISTORY_PAGE`` at a time and at most ``MAX_WALK``, to the
    latest one written for new input (or the first). A checkpoint's metadata says which nodes
    ran in the steps that wrote it (``"ran"``: ``[{"node": name, ...}]``), so only the
    metadata is decoded, not the states. A thread with checkpoints written before they said
    so is read through its history: of such a checkpoint, the nodes planned at the one before
    it (its ``next``) ran.
    """
    walk: list[tuple[str, dict[str, Any]]] = []
    before: int | None = None
    while len(walk) < MAX_WALK:
        limit = min(HISTORY_PAGE, MAX_WALK - len(walk))
        page = await app.store.list_checkpoints(thread, before_seq=before, limit=limit)
        walk.extend((r.source, app.reader.meta(r)) for r in page)
        if any(r.source == "input" for r in page) or len(page) < limit:
            break
        before = page[-1].seq
    start = next((i for i, (source, _) in enumerate(walk) if source == "input"), len(walk) - 1)
    metas = [meta for _, meta in walk[: start + 1]]
    if not all(isinstance(meta.get("ran"), list) for meta in metas[:-1]):
        return await _ran_from_history(app, thread, len(metas))
    return {name for meta in metas for name in _ran_names(meta.get("ran") or ())}


async def _ran_from_history(app: App[Any], thread: str, count: int) -> set[str]:
    """`ran_in_run` for checkpoints that do not all say what ran: the ``count`` latest."""
    walk: list[StateSnapshot[Any]] = []
    before: str | None = None
    while len(walk) < count:
        page = await app.history(thread, limit=min(HISTORY_PAGE, count - len(walk)), before=before)
        walk.extend(page)
        if not page:
            break
        before = page[-1].checkpoint_id
    done: set[str] = set()
    for i, snapshot in enumerate(walk):
        ran = snapshot.metadata.get("ran")
        if isinstance(ran, list):
            done.update(_ran_names(ran))
        elif i + 1 < len(walk):
            done.update(walk[i + 1].next)
    return done


def _ran_names(ran: Iterable[Any]) -> Iterable[str]:
    for entry in ran:
        name = entry.get("node") if isinstance(entry, Mapping) else None
        if isinstance(name, str):
            yield name


def position(
    status: str,
    next_nodes: Iterable[str],
    interrupts: Iterable[Interrupt],
    ran: Iterable[str] = (),
) -> dict[str, Mark]:
    """The marks of a thread's position (see the module's docstring).

    A node keeps the first mark it gets of ``waiting``, ``failed``, ``next``, ``done``: a next
    node that waits on an interrupt, deep inside or not, is waiting.

    Examples:
        >>> from interlock.runtime import Address
        >>> class Asking:
        ...     address = Address.parse("node:team/node:tools/tool:delete:c1")
        >>> position("interrupted", ["team"], [Asking()], ran=["model", "team"])
        {'team/tools': 'waiting', 'team': 'waiting', 'model': 'done'}
    """
    marks: dict[str, Mark] = {}
    for interrupt in interrupts:
        path = node_path(interrupt.address)
        if not path:
            continue  # asked of the whole graph (an external pause): no node waits
        marks[path] = "waiting"
        names = path.split("/")
        for i in range(len(names) - 1, 0, -1):
            marks["/".join(names[:i])] = "waiting"
    for name in next_nodes:
        marks.setdefault(name, "failed" if status == "failed" else "next")
    for name in ran:
        marks.setdefault(name, "done")
    return marks


# -- the routes ----------------------------------------------------------------------------------


async def get_thread_graph(request: Request) -> Response:
    state, identity = _state(request), _identity(request, "viewer")
    thread = _path(request, "thread")
    served = await _readable_thread(state, identity, thread, read_query(request, ThreadQuery).app)

    def sees(interrupt: Interrupt) -> bool:
        # Every tool on the way: the name of an agent offered as a tool is a node's path too.
        tools = [s.name for s in interrupt.address if s.kind == "tool"]
        return all(map(identity.sees_tool, tools)) if tools else identity.sees_tool(None)

    status, marks = await _thread_position(served, thread, sees)
    body = ThreadGraph(
        app=served.name,
        thread=thread,
        status=status,
        mermaid=served.app.draw(marks=marks, show_tool=identity.sees_tool),
        marks=dict(marks),
    )
    return json_response(body)


async def _thread_position(
    served: Served, thread: str, sees: Callable[[Interrupt], bool]
) -> tuple[str, dict[str, Mark]]:
    """The thread's status and marks; the questions of tools outside the scope are left out."""
    try:
        snapshot = await served.app.get_state(thread)
        ran = await ran_in_run(served.app, thread)
    except CheckpointNotFound as exc:
        raise ApiError(404, "unknown_thread", f"no thread {thread!r}") from exc
    except CheckpointCorrupt as exc:
        raise ApiError(500, "damaged_record", f"{exc}; restore the store from a backup") from exc
    except GraphChanged:
        # Written by another graph: its state cannot be read here, its questions can.
        head = await served.store.get_checkpoint(thread)
        if head is None:
            raise ApiError(404, "unknown_thread", f"no thread {thread!r}") from None
        rows = await served.store.pending(PendingFilter(thread=thread), limit=MAX_PAGE)
        try:
            asked = [served.interrupt(row) for row in rows]
        except CheckpointCorrupt as exc:
            raise ApiError(
                500, "damaged_record", f"{exc}; restore the store from a backup"
            ) from exc
        return head.status, position(head.status, (), filter(sees, asked))
    asked = [i for i in snapshot.interrupts if i.status == "pending" and sees(i)]
    return snapshot.status, position(snapshot.status, snapshot.next, asked, ran)


async def get_app_graph(request: Request) -> Response:
    state = _state(request)
    identity = _identity(request, "viewer")
    query = read_query(request, ThreadQuery)
    if "" not in identity.threads:
        # The drawing names the app's tools, which those of its threads outside the identity's
        # prefixes call: it reads a thread's graph instead, as the inbox's counts ask a thread.
        raise ApiError(
            403,
            "forbidden",
            f"{identity.name} sees only threads starting with {sorted(identity.threads)}; "
            "an app's graph needs an identity whose thread scope is all threads: read the "
            "graph of one of its threads, GET /v1/threads/{thread}/graph",
        )
    served = _served_for(state, query.app)
    drawn = served.app.draw(show_tool=identity.sees_tool)
    return json_response(AppGraph(app=served.name, mermaid=drawn))


# -- the renderer --------------------------------------------------------------------------------


MERMAID_VERSION: Final = "11.17.2"
"""The version of Mermaid in ``web/vendor/`` (the tests' parser is pinned to the same)."""
_SCRIPT: Final = "mermaid.min.js.gz"


class _Vendored:
    """A gzipped file of ``web/vendor/``, read once: its bytes, plain ones when asked, ETags."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.gzipped = b""
        self.plain: bytes | None = None
        self.etag = ""

    async def load(self, *, plain: bool) -> bytes:
        # Two first requests at once may both read it: the same bytes, so no lock (which would
        # tie this module-wide object to one event loop).
        if not self.gzipped:
            path = resources.files("interlock.server") / "web" / "vendor" / self.name
            gzipped = await anyio.to_thread.run_sync(path.read_bytes)
            self.etag = hashlib.sha256(gzipped).hexdigest()[:32]
            self.gzipped = gzipped
        if not plain:
            return self.gzipped
        if self.plain is None:
            self.plain = await anyio.to_thread.run_sync(gzip.decompress, self.gzipped)
        return self.plain


_MERMAID: Final = _Vendored(_SCRIPT)


def _takes_gzip(accept_encoding: str) -> bool:
    """Whether an ``Accept-Encoding`` header takes gzip (``gzip``, ``x-gzip`` or ``*``, q > 0)."""
    for part in accept_encoding.split(","):
        coding, *params = (p.strip() for p in part.split(";"))
        if coding.lower() not in ("gzip", "x-gzip", "*"):
            continue
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if q > 0:
            return True
    return False


async def mermaid_script(request: Request) -> Response:
    """``GET /web/vendor/mermaid.min.js``: Mermaid's browser build, gzip-encoded (plain for a
    client that does not take gzip). The path names no version, so the answer is revalidated
    (``no-cache``) against its ETag, as the other files of the page are."""
    plain = not _takes_gzip(request.headers.get("accept-encoding", ""))
    body = await _MERMAID.load(plain=plain)
    etag = f'"{_MERMAID.etag}"' if plain else f'"{_MERMAID.etag}-gzip"'
    headers = {"ETag": etag, "Cache-Control": "no-cache", "Vary": "Accept-Encoding"}
    asked = request.headers.get("if-none-match", "")
    if etag in (t.strip() for t in asked.split(",")) or asked.strip() == "*":
        return Response(status_code=304, headers=headers)
    if not plain:
        headers["Content-Encoding"] = "gzip"
    return Response(body, media_type="text/javascript; charset=utf-8", headers=headers)
