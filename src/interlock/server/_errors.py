"""Refusals of the HTTP API: a status, a stable code and a message that says what to do."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec
from starlette.responses import Response

from ._views import DecisionBody, ErrorBody, StateProblem

__all__ = ["ApiError", "json_response"]


class ApiError(Exception):
    """Raised by a handler; the server answers it as ``ErrorBody`` JSON."""

    def __init__(
        self,
        status: int,
        error: str,
        message: str,
        *,
        decision: DecisionBody | None = None,
        headers: Mapping[str, str] | None = None,
        error_id: str | None = None,
        problems: Sequence[StateProblem] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = ErrorBody(error=error, message=message, decision=decision, error_id=error_id)
        if problems is not None:
            self.body.problems = list(problems)
        self.headers = dict(headers or {})

    def response(self) -> Response:
        return json_response(self.body, self.status, self.headers)


def json_response(
    body: object, status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    """``body`` (a Struct or builtins) encoded as JSON."""
    return Response(
        msgspec.json.encode(body),
        status_code=status,
        media_type="application/json",
        headers=dict(headers or {}),
    )
