"""The route table as clients meet it: at every bound of every query parameter, the server and
its OpenAPI document agree (a value at the bound is taken by both, one past it refused by
both), with the words the server has always used. The cases come from the table, so a new
route or parameter is covered without a new test."""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import jsonschema
import msgspec
import pytest
from _serving import Serving, auth, bearer, order_app, serving
from msgspec import inspect as mi

from interlock.server import create_app
from interlock.server._params import InterruptsQuery, ThreadQuery
from interlock.server._routes import ROUTES, Route


@dataclasses.dataclass(frozen=True)
class Case:
    """One value of one query parameter of one route, and whether it is within its bounds."""

    route: Route
    name: str
    value: Any
    """As the document's schema sees it (a number for a number)."""
    valid: bool

    @property
    def id(self) -> str:
        long = isinstance(self.value, str) and len(self.value) > 20
        shown = f"{len(self.value)} chars" if long else repr(self.value)
        return f"{self.route.name}-{self.name}={shown}-{'taken' if self.valid else 'refused'}"


def _bare(kind: mi.Type) -> mi.Type:
    """The type of a query field without its None and its metadata."""
    if isinstance(kind, mi.UnionType):
        (kind,) = [t for t in kind.types if not isinstance(t, mi.NoneType)]
    return kind.type if isinstance(kind, mi.Metadata) else kind


def _cases() -> Iterator[Case]:
    for route in ROUTES:
        if route.query is None:
            continue
        info = mi.type_info(route.query)
        assert isinstance(info, mi.StructType)
        for field in info.fields:
            kind = _bare(field.type)
            name = field.encode_name
            if isinstance(kind, mi.IntType):
                assert kind.ge is not None and kind.le is not None
                yield Case(route, name, kind.ge, True)
                yield Case(route, name, kind.le, True)
                yield Case(route, name, kind.ge - 1, False)
                yield Case(route, name, kind.le + 1, False)
            elif isinstance(kind, mi.FloatType):
                assert kind.ge is not None and kind.le is not None
                yield Case(route, name, float(kind.ge), True)
                yield Case(route, name, float(kind.le), True)
                yield Case(route, name, math.nextafter(kind.ge, -math.inf), False)
                yield Case(route, name, math.nextafter(kind.le, math.inf), False)
            elif isinstance(kind, mi.LiteralType):
                yield from (Case(route, name, value, True) for value in kind.values)
                yield Case(route, name, "-".join(map(str, kind.values)), False)
            elif isinstance(kind, mi.StrType):
                # Any text may mean nothing to the route (a cursor): only the refusals are sure.
                assert kind.max_length is not None, f"{route.name}: {name} needs a max_length"
                yield Case(route, name, "x" * (kind.max_length + 1), False)
                if kind.pattern is not None:
                    yield Case(route, name, "a\x00", False)
            else:
                raise AssertionError(f"{route.name}: no bounds to test for {name}: {kind}")


CASES = list(_cases())


@pytest.fixture(scope="module")
def orders(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    """An order server with thread t1 waiting on a question."""
    db = tmp_path_factory.mktemp("routes") / "o.db"
    with serving(lambda: create_app(order_app(db), auth=auth())) as s:
        started = httpx.post(
            f"{s.url}/v1/threads/t1/runs",
            json={"input": {"n": 1}, "wait": True},
            headers=bearer("root"),
        )
        assert started.status_code == 200, started.text
        yield s


@pytest.fixture(scope="module")
def document(orders: Serving) -> dict[str, Any]:
    served: dict[str, Any] = httpx.get(f"{orders.url}/openapi.json").json()
    return served


def _parameter(document: dict[str, Any], route: Route, name: str) -> dict[str, Any]:
    operation = document["paths"][route.path][route.method.lower()]
    (found,) = [p for p in operation["parameters"] if p["name"] == name and p["in"] == "query"]
    return dict(found)


def _send(orders: Serving, route: Route, params: dict[str, Any]) -> httpx.Response:
    """The answer's status line and body (a stream is closed once its status is known)."""
    url = orders.url + route.path.replace("{thread}", "t1")
    with httpx.Client(timeout=10) as client:
        body = {} if route.body is not None else None
        with client.stream(
            route.method, url, params=params, json=body, headers=bearer("root")
        ) as answer:
            if answer.headers["content-type"].startswith("application/json"):
                answer.read()
            return answer


def test_every_query_field_is_a_documented_parameter(document: dict[str, Any]) -> None:
    for route in ROUTES:
        operation = document["paths"][route.path][route.method.lower()]
        documented = [p for p in operation.get("parameters", ()) if p["in"] == "query"]
        fields = msgspec.structs.fields(route.query) if route.query is not None else ()
        assert [p["name"] for p in documented] == [f.encode_name for f in fields], route.name
        assert all(p["description"] and p["required"] is False for p in documented), route.name


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_at_each_bound_the_server_and_the_document_agree(
    orders: Serving, document: dict[str, Any], case: Case
) -> None:
    schema = _parameter(document, case.route, case.name)["schema"]
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid(case.value) is case.valid, schema
    shown = repr(case.value) if isinstance(case.value, float) else case.value
    answer = _send(orders, case.route, {case.name: shown})
    if case.valid:
        assert answer.status_code != 400, answer.text
    else:
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"] == "bad_parameter"
        assert answer.json()["message"].startswith(f"{case.name} ")


def test_the_cases_reach_every_route_with_a_query() -> None:
    with_query = {route.name for route in ROUTES if route.query is not None}
    assert {case.route.name for case in CASES} == with_query
    assert {"limit", "older_than", "deadline_before", "status", "after", "types"} <= {
        case.name for case in CASES
    }


ROUTE = {route.name: route for route in ROUTES}
LONG = "x" * 513


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("list_interrupts", {"limit": "0"}, "limit must be a number from 1 to 500"),
        ("list_interrupts", {"limit": "x"}, "limit must be a number from 1 to 500"),
        ("list_interrupts", {"limit": "1.5"}, "limit must be a whole number from 1 to 500"),
        ("list_interrupts", {"older_than": "nan"}, "older_than must be a number from 0 to 1e+10"),
        (
            "count_interrupts",
            {"deadline_before": "-0.5"},
            "deadline_before must be a number from 0 to 1e+11",
        ),
        (
            "count_interrupts",
            {"thread": LONG},
            "thread is 513 characters long; at most 512 are allowed",
        ),
        (
            "list_interrupts",
            {"key": "\x00"},
            "key holds a NUL character at position 0, which PostgreSQL cannot store in text; "
            "remove it",
        ),
        (
            "list_threads",
            {"status": "nope"},
            "status must be one of ['ready', 'interrupted', 'paused', 'done', 'failed']",
        ),
        ("get_audit", {"after": "-1"}, "after must be a number from 0 to 4.61169e+18"),
        (
            "get_events",
            {"types": "run.finished, nope"},
            "types must be among ['interrupt.created', 'interrupt.decided', "
            "'interrupt.expired', 'interrupt.cancelled', 'run.finished', 'run.failed']",
        ),
        ("post_pause", {"app": LONG}, "app is 513 characters long; at most 512 are allowed"),
    ],
)
def test_a_refusal_says_what_it_always_said(
    orders: Serving, name: str, params: dict[str, str], message: str
) -> None:
    answer = _send(orders, ROUTE[name], params)
    assert answer.status_code == 400, answer.text
    assert answer.json() == {
        "error": "bad_parameter",
        "message": message,
        "decision": None,
        "error_id": None,
    }


@pytest.mark.parametrize("limit", ["2", " 2", "+2", "02", "2.0", "2e0", ""])
def test_a_number_is_read_as_python_reads_one(orders: Serving, limit: str) -> None:
    answer = _send(orders, ROUTE["list_threads"], {"limit": limit})
    assert answer.status_code == 200, answer.text


def test_a_handler_that_reads_another_query_than_its_route_declares_is_a_server_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The document would describe ThreadQuery while the handler reads InterruptsQuery.
    wrong = tuple(
        dataclasses.replace(route, query=ThreadQuery) if route.query is InterruptsQuery else route
        for route in ROUTES
    )
    monkeypatch.setattr("interlock.server._app.ROUTES", wrong)
    server = serving(lambda: create_app(order_app(tmp_path / "o.db"), auth=auth()))
    with server as s, caplog.at_level(logging.ERROR, logger="interlock.server"):
        answer = httpx.get(f"{s.url}/v1/interrupts", headers=bearer("vic"))
    assert answer.status_code == 500, answer.text
    assert answer.json()["error"] == "internal"
    assert any(
        "reads its query as InterruptsQuery, but the route table declares ThreadQuery"
        in record.getMessage()
        for record in caplog.records
    )
