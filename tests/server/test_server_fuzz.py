"""Schemathesis over the OpenAPI document: generated requests get no 5xx and no answer the
document does not describe.

Every check runs but one: "a request the schema allows is accepted". The API refuses more
than its schema can say (a cursor it did not give out, a payload hash of another question),
and says so with a documented 400, 412 or 422.

The event stream (``GET /v1/events``) is left out: a valid request to it never ends. Its
refusals and its frames are tested in test_server_events.py.
"""

from __future__ import annotations

from pathlib import Path

import httpx2 as httpx
import pytest
import schemathesis
from _serving import auth, bearer, order_app, serving
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import positive_data_acceptance

from interlock.server import create_app
from interlock.server._openapi import openapi

SCHEMA = schemathesis.openapi.from_dict(openapi("interlock", "0"))
EXAMPLES = 130
"""Per operation; the total must reach 1,000."""


@pytest.mark.slow
def test_generated_requests_get_no_server_error_and_match_the_document(tmp_path: Path) -> None:
    db = tmp_path / "fuzz.db"
    sent = 0
    with serving(lambda: create_app(order_app(db), auth=auth(), decision_burst=10**6)) as s:
        with httpx.Client(base_url=s.url, timeout=10) as client:
            for n in range(3):
                r = client.post(
                    f"/v1/threads/f{n}/runs",
                    json={"input": {"n": n}, "wait": True},
                    headers=bearer("root"),
                )
                assert r.status_code == 200
        for result in SCHEMA.get_all_operations():
            operation = result.ok()
            if operation.path == "/v1/events":
                continue
            who = st.sampled_from(["root", "ana", "vic", "nobody"])

            @given(case=operation.as_strategy(), who=who)
            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                suppress_health_check=list(HealthCheck),
                database=None,
            )
            def check(case: schemathesis.Case, who: str) -> None:
                nonlocal sent
                headers = {} if who == "nobody" else bearer(who)
                case.call_and_validate(
                    base_url=s.url, headers=headers, excluded_checks=[positive_data_acceptance]
                )
                sent += 1

            check()
    assert sent >= 1000, sent


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/openapi.json"])
def test_the_open_routes_need_no_token(tmp_path: Path, path: str) -> None:
    with serving(lambda: create_app(order_app(tmp_path / "o.db"), auth=auth())) as s:
        assert httpx.get(s.url + path).status_code == 200
