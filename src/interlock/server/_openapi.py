"""The OpenAPI 3.1 description of the HTTP API, built from the same Structs the handlers speak."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Final, get_args

import msgspec

from .._args import MAX_ID, UNSAFE_FORMAT
from ..stores import CheckpointStatus
from ._events import EVENT_TYPES
from ._views import (
    AuditPage,
    DecisionRequest,
    DecisionResult,
    DeliveryPage,
    ErrorBody,
    HistoryPage,
    IdentityView,
    InterruptCounts,
    InterruptDetail,
    InterruptPage,
    PauseAccepted,
    PauseRequest,
    RunAccepted,
    RunRequest,
    Status,
    ThreadPage,
    ThreadView,
)

__all__ = ["ROUTES", "openapi"]

_BODIES: Final = (
    Status,
    DeliveryPage,
    AuditPage,
    DecisionRequest,
    DecisionResult,
    ErrorBody,
    HistoryPage,
    IdentityView,
    InterruptCounts,
    InterruptDetail,
    InterruptPage,
    PauseAccepted,
    PauseRequest,
    RunAccepted,
    RunRequest,
    ThreadPage,
    ThreadView,
)


def _ref(kind: type) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{kind.__name__}"}


def _json(kind: type, description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(kind)}}}


def _error(description: str) -> dict[str, Any]:
    return _json(ErrorBody, description)


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


_NEW_NAME: Final = (
    "^[^/\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029"
    + "".join(f"\\u{ord(c):04x}" for c in sorted(UNSAFE_FORMAT))
    + "]+$"
)
"""What `check_name` lets through (a new thread's id): no control character, line break or
bidirectional control (nor ``/``, which ends a path segment)."""

_IDEMPOTENCY_KEY: Final = {
    "type": "string",
    "minLength": 1,
    "maxLength": 200,
    # Visible ASCII, spaces inside only: HTTP drops a header value's outer spaces.
    "pattern": "^[!-~]([ -~]*[!-~])?$",
}


def _in_path(name: str, description: str, *, pattern: str = "^[^/\\u0000]+$") -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "schema": {"type": "string", "minLength": 1, "maxLength": MAX_ID, "pattern": pattern},
        "description": description,
    }


_TEXT: Final = {"type": "string", "maxLength": MAX_ID, "pattern": "^[^\\u0000]*$"}
_LIMIT: Final = {"type": "integer", "minimum": 1, "maximum": 500}
_TYPE: Final = "(?:" + "|".join(t.replace(".", "\\.") for t in EVENT_TYPES) + ")"
_TYPES: Final = {
    "type": "string",
    "maxLength": MAX_ID,  # a query parameter's text is bounded as an id is
    "pattern": f"^ *(?:{_TYPE} *)?(?:, *(?:{_TYPE} *)?)*$",
}
"""``types``: event types, comma-separated (spaces around them allowed)."""
_AUTH_ERRORS: Final = {
    "401": _error("No valid bearer token."),
    "403": _error("The identity's role or scopes do not allow this."),
}
_BAD: Final = {"400": _error("A parameter is not valid.")}
_FAULT: Final = _error(
    "The server or its store failed (500: a damaged record; 503: the store is closed or does "
    "not answer, see Retry-After): the message says what to do."
)
_APP: Final = _query("app", _TEXT, "The served app (needed when several are served).")

_INBOX_FILTERS: Final = [
    _query("thread", _TEXT, "Only this thread's."),
    _query("tool", _TEXT, "Only those gating this tool."),
    _query("key", _TEXT, "Only those with this key."),
    _query(
        "older_than",
        {"type": "number", "minimum": 0, "maximum": 1e10},
        "Raised at least this many seconds ago.",
    ),
    _query(
        "deadline_before",
        {"type": "number", "minimum": 0, "maximum": 1e11},
        "Deadline before this Unix time.",
    ),
]
"""The filters the inbox listing and its counts share."""

# (path, method, handler name, operation)
ROUTES: Final[list[tuple[str, str, str, dict[str, Any]]]] = [
    (
        "/v1/interrupts",
        "get",
        "list_interrupts",
        {
            "summary": "List pending interrupts (the inbox), oldest first",
            "parameters": [
                _APP,
                *_INBOX_FILTERS,
                _query("limit", _LIMIT, "Page size (default 50)."),
                _query("after", _TEXT, "The previous page's next."),
            ],
            "responses": {
                "200": _json(InterruptPage, "A page."),
                **_BAD,
                **_AUTH_ERRORS,
                "404": _error("No such app."),
            },
        },
    ),
    # Before /v1/interrupts/{id}: routes are matched in this order.
    (
        "/v1/interrupts/counts",
        "get",
        "count_interrupts",
        {
            "summary": "Count pending interrupts per tool (the inbox's filters)",
            "description": (
                "Counted through the store's index, for the tools in the identity's scope. An "
                "identity limited to some thread prefixes must pass a thread within them: "
                "without one the answer is 403, since the index counts all threads or one."
            ),
            "parameters": [
                _APP,
                *_INBOX_FILTERS,
            ],
            "responses": {
                "200": _json(InterruptCounts, "The counts."),
                **_BAD,
                **_AUTH_ERRORS,
                "404": _error("No such app."),
            },
        },
    ),
    (
        "/v1/interrupts/{id}",
        "get",
        "get_interrupt",
        {
            "summary": "One interrupt with its thread's context and audit trail",
            "parameters": [_in_path("id", "The interrupt id.")],
            "responses": {
                "200": _json(InterruptDetail, "The interrupt."),
                **_BAD,
                **_AUTH_ERRORS,
                "404": _error("No such interrupt."),
            },
        },
    ),
    (
        "/v1/interrupts/{id}/decision",
        "post",
        "post_decision",
        {
            "summary": "Decide an interrupt",
            "description": (
                "Records the authenticated identity's answer, exactly once, then continues the "
                "thread in the background. The body carries the payload hash of the question as "
                "shown; the Idempotency-Key header makes a retried request safe."
            ),
            "parameters": [
                _in_path("id", "The interrupt id."),
                {
                    "name": "Idempotency-Key",
                    "in": "header",
                    "required": True,
                    "schema": _IDEMPOTENCY_KEY,
                    "description": "New for each decision; the same key and body is a replay.",
                },
            ],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _ref(DecisionRequest)}},
            },
            "responses": {
                "200": _json(DecisionResult, "The same request again: the recorded decision."),
                "201": _json(DecisionResult, "Recorded."),
                **_BAD,
                **_AUTH_ERRORS,
                "404": _error("No such interrupt."),
                "409": _error(
                    "Someone decided first (their decision is included), or the thread is busy."
                ),
                "412": _error("The question changed since it was shown."),
                "413": _error("The body is too large."),
                "400": _error(
                    "A parameter is not valid, or the body nests deeper than the server takes."
                ),
                "422": _error(
                    "The body is not valid, the answer fails the question's schema (or cannot "
                    "be stored), or the key was reused."
                ),
                "429": _error("Too many decisions from this identity."),
            },
        },
    ),
    (
        "/v1/threads",
        "get",
        "list_threads",
        {
            "summary": "List threads by app and id, e.g. the failed ones",
            "parameters": [
                _APP,
                _query(
                    "status",
                    {"type": "string", "enum": list(get_args(CheckpointStatus))},
                    "Only threads with this status (failed: those waiting for a fix and a "
                    "resume, with why).",
                ),
                _query("limit", _LIMIT, "Page size (default 50)."),
                _query("after", _TEXT, "The previous page's next."),
            ],
            "responses": {
                "200": _json(ThreadPage, "A page."),
                **_BAD,
                **_AUTH_ERRORS,
                "404": _error("No such app."),
            },
        },
    ),
    (
        "/v1/threads/{thread}",
        "get",
        "get_thread",
        {
            "summary": "A thread's latest state",
            "parameters": [_in_path("thread", "The thread id."), _APP],
            "responses": {
                "200": _json(ThreadView, "The thread."),
                **_BAD,
                **_AUTH_ERRORS,
                "404": _error("No such thread."),
            },
        },
    ),
    (
        "/v1/threads/{thread}/history",
        "get",
        "get_history",
        {
            "summary": "A thread's checkpoints, newest first",
            "parameters": [
                _in_path("thread", "The thread id."),
                _APP,
                _query("limit", _LIMIT, "Page size (default 20)."),
                _query("before", _TEXT, "The previous page's next."),
            ],
            "responses": {
                "200": _json(HistoryPage, "A page."),
                **_BAD,
                **_AUTH_ERRORS,
                "404": _error("No such thread or checkpoint."),
            },
        },
    ),
    (
        "/v1/threads/{thread}/audit",
        "get",
        "get_audit",
        {
            "summary": "A thread's audit log",
            "parameters": [
                _in_path("thread", "The thread id."),
                _APP,
                _query("limit", _LIMIT, "Page size (default 100)."),
                _query(
                    "after",
                    {"type": "integer", "minimum": 0, "maximum": 2**62},
                    "The previous page's next.",
                ),
            ],
            "responses": {
                "200": _json(AuditPage, "A page."),
                **_BAD,
                **_AUTH_ERRORS,
                "404": _error("No such thread."),
            },
        },
    ),
    (
        "/v1/threads/{thread}/runs",
        "post",
        "post_run",
        {
            "summary": "Start a turn with new input, or continue the thread",
            "description": (
                "New input may start a thread, so its id must be printable on one line: no "
                "control character, line break or bidirectional control. The input is an "
                "object of the app's state keys."
            ),
            "parameters": [_in_path("thread", "The thread id.", pattern=_NEW_NAME)],
            "requestBody": {
                "required": False,
                "content": {"application/json": {"schema": _ref(RunRequest)}},
            },
            "responses": {
                "200": _json(RunAccepted, "With wait: the run stopped; the thread's view."),
                "202": _json(RunAccepted, "Accepted; it runs in the background."),
                **_BAD,
                **_AUTH_ERRORS,
                "404": _error("No such thread or app."),
                "400": _error(
                    "A parameter is not valid, or the body nests deeper than the server takes."
                ),
                "409": _error("The thread waits on decisions, or is running."),
                "413": _error("The body is too large."),
                "422": _error("The body or its input is not valid."),
            },
        },
    ),
    (
        "/v1/threads/{thread}/pause",
        "post",
        "post_pause",
        {
            "summary": "Ask whichever process runs the thread to pause it",
            "parameters": [_in_path("thread", "The thread id."), _APP],
            "requestBody": {
                "required": False,
                "content": {"application/json": {"schema": _ref(PauseRequest)}},
            },
            "responses": {
                "202": _json(PauseAccepted, "Stored."),
                **_BAD,
                **_AUTH_ERRORS,
                "400": _error(
                    "A parameter is not valid, or the body nests deeper than the server takes."
                ),
                "404": _error("No such thread."),
                "413": _error("The body is too large."),
                "422": _error("The body is not valid."),
            },
        },
    ),
    (
        "/v1/me",
        "get",
        "get_me",
        {
            "summary": "Who the token belongs to",
            "responses": {"200": _json(IdentityView, "The identity."), **_AUTH_ERRORS},
        },
    ),
    (
        "/v1/deliveries",
        "get",
        "get_deliveries",
        {
            "summary": "The notifier's latest delivery attempts (admin)",
            "parameters": [
                _query("limit", _LIMIT, "At most this many, the latest (default 100)."),
                _query("event_id", _TEXT, "Only this event's."),
            ],
            "responses": {"200": _json(DeliveryPage, "The attempts."), **_BAD, **_AUTH_ERRORS},
        },
    ),
    (
        "/v1/events",
        "get",
        "get_events",
        {
            "summary": "Server-sent events: interrupts created, decided, expired; runs finished",
            "description": (
                "A text/event-stream. Each event's id is a position: reconnect with "
                "Last-Event-ID (or ?last_event_id=) to continue after it."
            ),
            "parameters": [
                _query("types", _TYPES, "Comma-separated event types to receive."),
                _query("last_event_id", _TEXT, "Continue after this event id."),
                {
                    "name": "Last-Event-ID",
                    "in": "header",
                    "required": False,
                    "schema": _TEXT,
                    "description": "Continue after this event id.",
                },
            ],
            "responses": {
                "200": {
                    "description": "The stream.",
                    "content": {"text/event-stream": {"schema": {"type": "string"}}},
                },
                **_BAD,
                **_AUTH_ERRORS,
            },
        },
    ),
]


def _run_request(
    generated: dict[str, Any], inputs: Mapping[str, Collection[str]]
) -> dict[str, Any]:
    """``RunRequest`` as the server takes it: an input is an object of the named app's keys."""
    wait = generated["properties"]["wait"]
    if not inputs:
        schema = {**generated, "properties": dict(generated["properties"])}
        schema["properties"]["input"] = {"type": ["object", "null"], "default": None}
        return schema

    def state(keys: Collection[str]) -> dict[str, Any]:
        return {
            "type": ["object", "null"],
            "properties": {key: {} for key in sorted(keys)},
            "additionalProperties": False,
            "default": None,
        }

    def variant(app: dict[str, Any], keys: Collection[str] | None) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {
                "app": app,
                "input": state(keys) if keys is not None else {"type": "null", "default": None},
                "wait": wait,
            },
            "required": ["app"] if "const" in app else [],
            "additionalProperties": False,
        }

    variants = [variant({"const": name}, keys) for name, keys in sorted(inputs.items())]
    # Without an app: the only one served, or (of several) the one whose thread it is, which
    # is known only to continue it.
    only = next(iter(inputs.values())) if len(inputs) == 1 else None
    variants.append(variant({"type": "null", "default": None}, only))
    return {
        "title": generated["title"],
        "description": generated["description"],
        "anyOf": variants,
    }


_PLAIN: Final = [
    ("/healthz", "The process answers.", "healthz"),
    ("/readyz", "Every store answers (503 when one does not).", "readyz"),
]


def openapi(
    title: str, version: str, *, inputs: Mapping[str, Collection[str]] | None = None
) -> dict[str, Any]:
    """The document served at ``/openapi.json``.

    Args:
        title: The API's title.
        version: Its version.
        inputs: The state keys of each served app (``{app: keys}``), which a run's input may
            set; without them, the input is any object.
    """
    _, components = msgspec.json.schema_components(
        _BODIES, ref_template="#/components/schemas/{name}"
    )
    components["RunRequest"] = _run_request(components["RunRequest"], inputs or {})
    paths: dict[str, dict[str, Any]] = {}
    for path, method, name, operation in ROUTES:
        op = {"operationId": name, "security": [{"bearer": []}], **operation}
        op["responses"] = {**op["responses"], "default": _FAULT}
        paths.setdefault(path, {})[method] = op
    for path, text, name in _PLAIN:
        paths[path] = {
            "get": {
                "operationId": name,
                "summary": text,
                "security": [],
                "responses": {
                    "200": _json(Status, "Healthy."),
                    **({"503": _json(Status, "Not ready.")} if name == "readyz" else {}),
                },
            }
        }
    paths["/metrics"] = {
        "get": {
            "operationId": "metrics",
            "summary": "Prometheus metrics",
            "security": [{"bearer": []}],
            "responses": {
                "200": {
                    "description": "Metrics.",
                    "content": {"text/plain": {"schema": {"type": "string"}}},
                },
                **_AUTH_ERRORS,
            },
        }
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
