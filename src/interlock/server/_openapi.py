"""The OpenAPI 3.1 description of the HTTP API, generated from the route table.

Every ``/v1`` operation comes from its `Route`: its parameters from the types of its path,
query and headers (their bounds are the ones the server refuses by), its body and answers from
the Structs the handler speaks.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Final

import msgspec

from ._routes import ROUTES, Answer, Param, Route
from ._views import ErrorBody, Status

__all__ = ["openapi"]

_BODIES: Final = tuple(
    dict.fromkeys(
        [
            Status,
            ErrorBody,
            *(
                kind
                for route in ROUTES
                for kind in (route.body, *(a.body for a in route.answers.values()))
                if kind is not None
            ),
        ]
    )
)
"""Every Struct a route takes or answers with (and the plain routes' `Status`): the
document's schemas."""


def _ref(kind: type) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{kind.__name__}"}


def _json(kind: type, description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(kind)}}}


def _error(description: str) -> dict[str, Any]:
    return _json(ErrorBody, description)


_AUTH_ERRORS: Final = {
    401: _error("No valid bearer token."),
    403: _error("The identity's role or scopes do not allow this."),
}
_FAULT: Final = _error(
    "The server or its store failed (500: a damaged record; 503: the store is closed or does "
    "not answer, see Retry-After): the message says what to do."
)


def _answer(answer: Answer) -> dict[str, Any]:
    schema = {"type": "string"} if answer.body is None else _ref(answer.body)
    return {"description": answer.description, "content": {answer.media_type: {"schema": schema}}}


def _parameter(param: Param, where: str) -> dict[str, Any]:
    return {
        "name": param.name,
        "in": where,
        "required": param.required or where == "path",
        "schema": msgspec.json.schema(param.kind),
        "description": param.description,
    }


def _query(kind: type[msgspec.Struct]) -> list[dict[str, Any]]:
    """One parameter per field of a query Struct: its schema without the None of an optional
    field, its description taken out to the parameter."""
    (_, components) = msgspec.json.schema_components((kind,))
    struct = components[kind.__name__]
    out = []
    for name, field in struct["properties"].items():
        schema = dict(field)
        if "anyOf" in schema:
            (present,) = [s for s in schema.pop("anyOf") if s != {"type": "null"}]
            schema = {**present, **schema}
        if schema.get("default", 0) is None:
            del schema["default"]
        out.append(
            {
                "name": name,
                "in": "query",
                "required": name in struct.get("required", ()),
                "schema": schema,
                "description": schema.pop("description"),
            }
        )
    return out


def _operation(route: Route) -> dict[str, Any]:
    parameters = [_parameter(p, "path") for p in route.path_params]
    if route.query is not None:
        parameters += _query(route.query)
    parameters += [_parameter(h, "header") for h in route.headers]
    answers = {status: _answer(a) for status, a in route.answers.items()} | _AUTH_ERRORS
    if parameters or route.body is not None:
        answers[400] = _error(
            "A parameter is not valid"
            + (", or the body nests deeper than the server takes." if route.body else ".")
        )
    operation: dict[str, Any] = {
        "operationId": route.name,
        "security": [{"bearer": []}],
        "summary": route.summary,
    }
    if route.description is not None:
        operation["description"] = route.description
    if parameters:
        operation["parameters"] = parameters
    if route.body is not None:
        answers[413] = _error("The body is too large.")
        operation["requestBody"] = {
            "required": route.body_required,
            "content": {"application/json": {"schema": _ref(route.body)}},
        }
    operation["responses"] = {str(s): answers[s] for s in sorted(answers)} | {"default": _FAULT}
    return operation


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
    for route in ROUTES:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route)
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
                **{str(s): a for s, a in _AUTH_ERRORS.items()},
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
