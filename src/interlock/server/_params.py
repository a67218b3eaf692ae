"""The parameters of the HTTP API: their types and bounds, and reading a query into its Struct.

Each bound is a `msgspec.Meta` on a type here, written once: the server refuses by it and the
OpenAPI document shows it (`interlock.server._openapi` generates the parameters from these
types). A route's query parameters are one Struct, read by `read_query`: a parameter that is
absent or empty takes the field's default; one that does not fit its type is refused with 400
``bad_parameter`` and a message that names it (an id-like text in the words of
`interlock._args.check_id`, a number with its range).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal, TypeVar, get_args, get_origin

import msgspec
from msgspec import Meta
from msgspec import inspect as mi
from starlette.requests import Request

from .._args import MAX_ID, UNSAFE_FORMAT, check_id
from ..stores import CheckpointStatus
from ._errors import ApiError
from ._events import EVENT_TYPES

__all__ = [
    "MAX_PAGE",
    "AuditQuery",
    "CompareQuery",
    "DeliveriesQuery",
    "EventsQuery",
    "HistoryQuery",
    "IdempotencyKey",
    "InboxQuery",
    "InterruptsQuery",
    "NewName",
    "PathId",
    "PrincipalsQuery",
    "Text",
    "ThreadQuery",
    "ThreadsQuery",
    "TimelineQuery",
    "TokensQuery",
    "check_declared",
    "declare",
    "read_query",
]

Q = TypeVar("Q", bound=msgspec.Struct)

MAX_PAGE: Final = 500
"""The largest page a listing of the API returns at once."""

Text = Annotated[str, Meta(max_length=MAX_ID, pattern="^[^\\u0000]*$")]
"""A query parameter's text: bounded as an id is, without NUL (`check_id`)."""

PathId = Annotated[str, Meta(min_length=1, max_length=MAX_ID, pattern="^[^/\\u0000]+$")]
"""An id in a path segment (which a ``/`` would end)."""

_NEW_NAME: Final = (
    "^[^/\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029"
    + "".join(f"\\u{ord(c):04x}" for c in sorted(UNSAFE_FORMAT))
    + "]+$"
)
NewName = Annotated[str, Meta(min_length=1, max_length=MAX_ID, pattern=_NEW_NAME)]
"""What `check_name` lets through (a new thread's id): no control character, line break or
bidirectional control (nor ``/``, which ends a path segment)."""

IdempotencyKey = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=200,
        # Visible ASCII, spaces inside only: HTTP drops a header value's outer spaces.
        pattern="^[!-~]([ -~]*[!-~])?$",
    ),
]
"""A decision's ``Idempotency-Key`` header."""

_TYPE: Final = "(?:" + "|".join(t.replace(".", "\\.") for t in EVENT_TYPES) + ")"
_Types = Annotated[
    str,
    Meta(
        max_length=MAX_ID,  # a query parameter's text is bounded as an id is
        pattern=f"^ *(?:{_TYPE} *)?(?:, *(?:{_TYPE} *)?)*$",
        description="Comma-separated event types to receive.",
        extra={"refusal": f"types must be among {list(EVENT_TYPES)}"},
    ),
]
"""``types``: event types, comma-separated (spaces around them allowed)."""

# The query parameters the routes share. A number's range (ge and le) is required: its
# refusal names it.
_App = Annotated[Text, Meta(description="The served app (needed when several are served).")]
_Page = Annotated[int, Meta(ge=1, le=MAX_PAGE, description="Page size.")]
_After = Annotated[Text, Meta(description="The previous page's next.")]
_Age = Annotated[float, Meta(ge=0, le=1e10, description="Raised at least this many seconds ago.")]
_Deadline = Annotated[float, Meta(ge=0, le=1e11, description="Deadline before this Unix time.")]
_Status = Annotated[
    CheckpointStatus,
    Meta(
        description="Only threads with this status (failed: those waiting for a fix and a "
        "resume, with why)."
    ),
]
_Seq = Annotated[int, Meta(ge=0, le=2**62, description="The previous page's next.")]


class ThreadQuery(msgspec.Struct):
    """The query of a route on one thread: which app's it is."""

    app: _App | None = None


class InboxQuery(msgspec.Struct):
    """The inbox's filters, which its listing and its counts share."""

    app: _App | None = None
    thread: Annotated[Text, Meta(description="Only this thread's.")] | None = None
    tool: Annotated[Text, Meta(description="Only those gating this tool.")] | None = None
    key: Annotated[Text, Meta(description="Only those with this key.")] | None = None
    older_than: _Age | None = None
    deadline_before: _Deadline | None = None


class InterruptsQuery(InboxQuery):
    """``GET /v1/interrupts``: the inbox's filters and a page."""

    limit: _Page = 50
    after: _After | None = None


class ThreadsQuery(msgspec.Struct):
    """``GET /v1/threads``."""

    app: _App | None = None
    status: _Status | None = None
    limit: _Page = 50
    after: _After | None = None


class HistoryQuery(msgspec.Struct):
    """``GET /v1/threads/{thread}/history``."""

    app: _App | None = None
    limit: _Page = 20
    before: _After | None = None


class AuditQuery(msgspec.Struct):
    """``GET /v1/threads/{thread}/audit``."""

    app: _App | None = None
    limit: _Page = 100
    after: _Seq | None = None


class DeliveriesQuery(msgspec.Struct):
    """``GET /v1/deliveries``."""

    limit: Annotated[_Page, Meta(description="At most this many, the latest.")] = 100
    event_id: Annotated[Text, Meta(description="Only this event's.")] | None = None


class PrincipalsQuery(msgspec.Struct):
    """``GET /v1/principals``."""

    limit: _Page = 100
    after: Annotated[Text, Meta(description="The previous page's next (a name).")] | None = None


class TokensQuery(msgspec.Struct):
    """``GET /v1/tokens``."""

    principal: Annotated[Text, Meta(description="Only this principal's.")] | None = None
    limit: _Page = 100
    after: Annotated[Text, Meta(description="The previous page's next (a token id).")] | None = None


class EventsQuery(msgspec.Struct):
    """``GET /v1/events``."""

    types: _Types | None = None
    last_event_id: Annotated[Text, Meta(description="Continue after this event id.")] | None = None


class TimelineQuery(msgspec.Struct):
    """``GET /v1/threads/{thread}/timeline``."""

    app: _App | None = None
    limit: _Page = 20
    before: _After | None = None


class CompareQuery(msgspec.Struct):
    """``GET /v1/threads/{thread}/compare``: the changes from one checkpoint to another."""

    app: _App | None = None
    from_: (
        Annotated[
            Text,
            Meta(description="The checkpoint compared from (default: the thread's first)."),
        ]
        | None
    ) = msgspec.field(default=None, name="from")
    to: (
        Annotated[Text, Meta(description="The checkpoint compared to (default: the latest).")]
        | None
    ) = None


# -- reading a query -----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _Field:
    """One query parameter as `read_query` reads it."""

    name: str
    """The parameter's name (the field's)."""
    kind: Any
    """The field's type without None: what a present value must convert to."""
    scalar: mi.Type
    """Its inspected form, which says what the text is read as."""
    bounds: tuple[float, float] | None
    """A number's range (its ge and le)."""
    refusal: str | None
    """The message for a value that fails the type, if the type names one."""

    def read(self, raw: str) -> Any:
        """The value of ``raw``, or 400 with the message that names this parameter."""
        value: Any = raw
        if self.bounds is not None:
            value = _number(raw, whole=isinstance(self.scalar, mi.IntType))
        try:
            return msgspec.convert(value, self.kind)
        except msgspec.ValidationError:
            raise ApiError(400, "bad_parameter", self.refused(value)) from None

    def refused(self, value: Any) -> str:
        """Why ``value`` (the text, or the number it reads as) is refused."""
        if self.bounds is not None:
            lo, hi = self.bounds
            # A number in range that is not whole, for a whole one: say which rule it broke.
            whole = isinstance(self.scalar, mi.IntType) and isinstance(value, float)
            what = "a whole number" if whole and lo <= value <= hi else "a number"
            return f"{self.name} must be {what} from {lo:g} to {hi:g}"
        try:
            check_id(value, self.name)
        except ValueError as exc:
            return str(exc)
        if self.refusal is not None:
            return self.refusal
        if isinstance(self.scalar, mi.LiteralType):
            # In the Literal's order (the inspected values are sorted).
            bare = get_args(self.kind)[0] if get_origin(self.kind) is Annotated else self.kind
            return f"{self.name} must be one of {list(get_args(bare))}"
        return f"{self.name} is not valid"


def _number(raw: str, *, whole: bool) -> float | int:
    """``raw`` read as Python reads a number (NaN when it is none); a whole one as an int."""
    if whole:
        try:
            return int(raw)
        except ValueError:
            pass
    try:
        value = float(raw)
    except ValueError:
        return float("nan")
    return int(value) if whole and value.is_integer() else value


@functools.cache
def _fields(kind: type[msgspec.Struct]) -> tuple[_Field, ...]:
    info = mi.type_info(kind)
    assert isinstance(info, mi.StructType)
    types = {f.encode_name: f.type for f in msgspec.structs.fields(kind)}
    fields = []
    for field in info.fields:
        scalar, kind_of = field.type, types[field.encode_name]
        if isinstance(scalar, mi.UnionType):
            # Optional: read as the one type besides None.
            (scalar,) = [t for t in scalar.types if not isinstance(t, mi.NoneType)]
            (kind_of,) = [t for t in get_args(kind_of) if t is not type(None)]
        extra: Mapping[str, Any] = {}
        if isinstance(scalar, mi.Metadata):
            extra = scalar.extra or {}
            scalar = scalar.type
        bounds = None
        if isinstance(scalar, mi.IntType | mi.FloatType):
            if scalar.ge is None or scalar.le is None:
                raise TypeError(f"{kind.__name__}.{field.name} needs a range: Meta(ge=, le=)")
            bounds = (scalar.ge, scalar.le)
        refusal = extra.get("refusal")
        fields.append(
            _Field(
                name=field.encode_name,  # as the query spells it (``from``, not ``from_``)
                kind=kind_of,
                scalar=scalar,
                bounds=bounds,
                refusal=refusal,
            )
        )
    return tuple(fields)


_DECLARED: Final = "interlock.declared"
"""The scope key of the query and body types the route table declares for a request."""


def declare(scope: MutableMapping[str, Any], query: type | None, body: type | None) -> None:
    """Note in ``scope`` the query and body types the route declares (see `check_declared`)."""
    scope[_DECLARED] = (query, body)


def check_declared(request: Request, kind: type, what: Literal["query", "body"]) -> None:
    """Refuse to read the query or body (``what``) as another type than the route declares.

    The route table names each route's types, from which the OpenAPI document is made; a
    handler that read another would serve what the document does not say. That is this
    server's fault, answered 500 on every request to the route.
    """
    query, body = request.scope.get(_DECLARED, (None, None))
    declared = query if what == "query" else body
    if declared is not kind:
        named = "none" if declared is None else declared.__name__
        raise TypeError(
            f"{request.url.path} reads its {what} as {kind.__name__}, but the route table "
            f"declares {named}: make them agree"
        )


def read_query(request: Request, kind: type[Q]) -> Q:
    """The request's query parameters as ``kind``, or 400 naming the first that does not fit.

    Parameters the Struct does not name are ignored; an empty one is absent.
    """
    check_declared(request, kind, "query")
    values = {}
    for field in _fields(kind):
        raw = request.query_params.get(field.name)
        if raw is not None and raw != "":
            values[field.name] = field.read(raw)
    return msgspec.convert(values, kind)
