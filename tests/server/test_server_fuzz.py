"""Schemathesis over the OpenAPI document the server serves: generated requests get no 5xx, no
answer the document does not describe, and a request the document allows is not refused as
malformed (the positive-data check, ST202): the document is as strict as the server.

Two things a document cannot say are given as the server gave them out: the ``after`` cursors
of the inbox and of the thread listing are opaque (only a ``next`` of an earlier page is one),
so a generated one is replaced with a real cursor. What a request refers to (an interrupt id,
a thread) is not generated to exist: those answers are 404s, which the check accepts.

The event stream (``GET /v1/events``) never ends on a valid request: its cases are sent by
hand, and only their status is checked once the headers arrive.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx2 as httpx
import jsonschema
import pytest
import schemathesis
from _serving import Serving, auth, bearer, order_app, serving
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import positive_data_acceptance

from interlock.server import create_app

EXAMPLES = 130
"""Per operation in the full run; the total must reach 1,000."""
QUICK_EXAMPLES = 5
"""Per operation in the quick run of the positive-data check."""
ACCEPTED = {401, 403, 404, 409, 429}
"""Answers to a schema-valid request that are not a refusal of its form (besides 2xx)."""


@dataclass
class Fuzzed:
    """A server with three threads waiting on a decision, and cursors it gave out."""

    serving: Serving
    after: str
    """The inbox's ``next`` after its first page."""
    threads_after: str
    """The thread listing's ``next`` after its first page."""
    event_id: str
    """The id of an event of its stream."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fuzzed]:
    db = tmp_path_factory.mktemp("fuzz") / "fuzz.db"
    with serving(lambda: create_app(order_app(db), auth=auth(), decision_burst=10**6)) as s:
        with httpx.Client(base_url=s.url, timeout=10) as client:
            with client.stream("GET", "/v1/events", headers=bearer("root")) as events:
                for n in range(3):
                    r = client.post(
                        f"/v1/threads/f{n}/runs",
                        json={"input": {"n": n}, "wait": True},
                        headers=bearer("root"),
                    )
                    assert r.status_code == 200
                lines = events.iter_lines()
                event_id = next(line for line in lines if line.startswith("id: "))[4:]
            page = client.get("/v1/interrupts", params={"limit": 1}, headers=bearer("root"))
            listed = client.get("/v1/threads", params={"limit": 1}, headers=bearer("root"))
        yield Fuzzed(
            serving=s,
            after=page.json()["next"],
            threads_after=listed.json()["next"],
            event_id=event_id,
        )


def _fuzz(fuzzed: Fuzzed, examples: int, *, every_check: bool) -> int:
    s = fuzzed.serving
    schema = schemathesis.openapi.from_dict(httpx.get(s.url + "/openapi.json").json())
    sent = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        who = st.sampled_from(["root", "ana", "vic", "nobody"])

        @given(case=operation.as_strategy(), who=who)
        @settings(
            max_examples=examples,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
        )
        def check(case: schemathesis.Case, who: str) -> None:
            nonlocal sent
            headers = {} if who == "nobody" else bearer(who)
            _given_cursors(case, fuzzed)
            if case.path == "/v1/events":
                _open_stream(s, case, headers)
            elif every_check:
                case.call_and_validate(base_url=s.url, headers=headers)
            else:
                case.call_and_validate(
                    base_url=s.url, headers=headers, checks=[positive_data_acceptance]
                )
            sent += 1

        check()
    return sent


def _given_cursors(case: schemathesis.Case, fuzzed: Fuzzed) -> None:
    """Put the server's own cursors where the case has generated ones."""
    query = case.query or {}
    if case.path == "/v1/interrupts" and "after" in query:
        query["after"] = fuzzed.after
    if case.path == "/v1/threads" and "after" in query:
        query["after"] = fuzzed.threads_after
    if case.path == "/v1/events":
        if "last_event_id" in query:
            query["last_event_id"] = fuzzed.event_id
        if case.headers and "Last-Event-ID" in case.headers:
            case.headers["Last-Event-ID"] = fuzzed.event_id


def _open_stream(s: Serving, case: schemathesis.Case, headers: dict[str, str]) -> None:
    """Send an event-stream case; its status (the stream is closed once it is known)."""
    kwargs: dict[str, Any] = case.as_transport_kwargs(base_url=s.url)
    # The token is the test's to give (or not), never a generated one.
    sent = {k: v for k, v in kwargs["headers"].items() if k.lower() != "authorization"}
    with httpx.Client(timeout=10) as client:
        request = client.build_request(
            kwargs["method"], kwargs["url"], params=kwargs.get("params"), headers=sent | headers
        )
        response = client.send(request, stream=True)
        response.close()
    assert response.status_code < 300 or response.status_code in ACCEPTED, (
        response.status_code,
        request.url,
    )


@pytest.mark.slow
def test_generated_requests_get_no_server_error_and_match_the_document(server: Fuzzed) -> None:
    assert _fuzz(server, EXAMPLES, every_check=True) >= 1000


def test_schema_valid_requests_are_accepted_on_every_operation(server: Fuzzed) -> None:
    assert _fuzz(server, QUICK_EXAMPLES, every_check=False) >= 10 * QUICK_EXAMPLES


RUNS = "/v1/threads/{thread}/runs"
DECISION = "/v1/interrupts/{id}/decision"


@pytest.mark.parametrize(
    ("route", "value", "body", "key"),
    [
        (RUNS, "new", {"input": 0}, None),
        (RUNS, "new", {"input": {"colour": "red"}}, None),
        (RUNS, "new", {"input": {"n": 1}, "app": "orders", "extra": 1}, None),
        (RUNS, "new\r\nline", {"input": {"n": 1}}, None),
        (RUNS, "new\u202egpj", {"input": {"n": 1}}, None),
        (DECISION, "x", {"payload_hash": "h", "answer": 1}, "\x7f"),
    ],
)
def test_what_the_server_refuses_as_malformed_the_document_refuses_too(
    server: Fuzzed, route: str, value: str, body: Any, key: str | None
) -> None:
    s = server.serving
    headers = {**bearer("root"), "Idempotency-Key": key or "k"}
    url = s.url + route.replace("{thread}", quote(value)).replace("{id}", quote(value))
    response = httpx.post(url, json=body, headers=headers)
    assert response.status_code in (400, 422), response.text
    document = httpx.get(s.url + "/openapi.json").json()
    operation = document["paths"][route]["post"]
    parameters = {p["name"]: p["schema"] for p in operation["parameters"]}
    root = {"components": document["components"]}
    parts = [
        (value, parameters["thread" if route == RUNS else "id"]),
        (body, {**root, **operation["requestBody"]["content"]["application/json"]["schema"]}),
    ]
    if key is not None:
        parts.append((key, parameters["Idempotency-Key"]))
    refused = []
    for part, schema in parts:
        try:
            jsonschema.validate(part, schema, cls=jsonschema.Draft202012Validator)
        except jsonschema.ValidationError:
            refused.append(part)
    assert refused, "the document allows a request the server refuses"


def test_a_types_list_too_long_for_the_server_is_too_long_for_the_document(
    server: Fuzzed,
) -> None:
    s = server.serving
    types = ", ".join(["interrupt.created"] * 40)  # each one valid, together too long
    response = httpx.get(s.url + "/v1/events", params={"types": types}, headers=bearer("root"))
    assert response.status_code == 400, response.text
    document = httpx.get(s.url + "/openapi.json").json()
    (schema,) = [
        p["schema"]
        for p in document["paths"]["/v1/events"]["get"]["parameters"]
        if p["name"] == "types"
    ]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(types, schema, cls=jsonschema.Draft202012Validator)


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/openapi.json"])
def test_the_open_routes_need_no_token(tmp_path: Path, path: str) -> None:
    with serving(lambda: create_app(order_app(tmp_path / "o.db"), auth=auth())) as s:
        assert httpx.get(s.url + path).status_code == 200
