"""The ``/v1`` route table: each route's path, method, handler, parameters, body and answers.

`create_app` mounts these routes and `openapi` describes them from the same entries: a
parameter's schema is its type's (`interlock.server._params`, bounds included), a body's is
its Struct's (`interlock.server._views`). A handler reads its query with `read_query` and its
body with ``_body``, as the types its entry names; reading another is a server error.

Answers every route shares are added to the document, not written here: 401 and 403 (auth),
400 when the route takes a parameter or a body, 413 when it takes a body, and the server's own
failures (500, 503).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from ._admin import (
    IssuedTokenView,
    NewPrincipal,
    NewToken,
    PrincipalChange,
    PrincipalPage,
    PrincipalView,
    RevokedTokens,
    TokenPage,
    change_principal,
    create_principal,
    create_token,
    list_principals,
    list_tokens,
    revoke_principal_tokens,
    revoke_token,
)
from ._api import (
    count_interrupts,
    get_audit,
    get_deliveries,
    get_events,
    get_history,
    get_interrupt,
    get_me,
    get_thread,
    list_interrupts,
    list_threads,
    post_decision,
    post_pause,
    post_run,
)
from ._fork import (
    CheckpointState,
    ForkRequest,
    ForkResult,
    StateSchemaView,
    get_checkpoint,
    get_state_schema,
    post_fork,
)
from ._graph import AppGraph, ThreadGraph, get_app_graph, get_thread_graph
from ._params import (
    AuditQuery,
    CompareQuery,
    DeliveriesQuery,
    EventsQuery,
    HistoryQuery,
    IdempotencyKey,
    InboxQuery,
    InterruptsQuery,
    NewName,
    PathId,
    PrincipalsQuery,
    Text,
    ThreadQuery,
    ThreadsQuery,
    TimelineQuery,
    TokensQuery,
)
from ._timeline import Comparison, TimelinePage, compare_checkpoints, get_timeline
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
    ThreadPage,
    ThreadView,
)

__all__ = ["ROUTES", "Answer", "Handler", "Param", "Route"]

Handler = Callable[[Request], Coroutine[Any, Any, Response]]


@dataclass(frozen=True, kw_only=True)
class Param:
    """A path or header parameter (a route's query parameters are its query Struct)."""

    name: str
    """As the path or the request names it."""
    kind: Any
    """Its type, with its bounds as `msgspec.Meta` (e.g. `PathId`)."""
    description: str
    required: bool = True
    """Always, for a path parameter."""


@dataclass(frozen=True, kw_only=True)
class Answer:
    """One response a route gives."""

    description: str
    body: type[msgspec.Struct] | None = ErrorBody
    """The Struct of its JSON body; None for text (the event stream)."""
    media_type: str = "application/json"


@dataclass(frozen=True, kw_only=True)
class Route:
    """One route of the ``/v1`` API."""

    path: str
    method: Literal["GET", "POST"]
    handler: Handler
    """Its name is the route's (`name`)."""
    summary: str
    description: str | None = None
    path_params: tuple[Param, ...] = ()
    """One per ``{name}`` in the path, in order."""
    query: type[msgspec.Struct] | None = None
    """The Struct its handler reads the query as (`read_query`); None: it reads none."""
    headers: tuple[Param, ...] = ()
    body: type[msgspec.Struct] | None = None
    """The Struct its handler reads the body as; None: it reads none."""
    body_required: bool = False
    answers: Mapping[int, Answer]
    """By status: the successes and the refusals particular to the route."""

    @property
    def name(self) -> str:
        """The handler's name: the operation id, the route's name and its metrics label."""
        return self.handler.__name__


def _json(kind: type[msgspec.Struct], description: str) -> Answer:
    return Answer(description=description, body=kind)


def _error(description: str) -> Answer:
    return Answer(description=description)


_ID: Final = Param(name="id", kind=PathId, description="The interrupt id.")
_THREAD: Final = Param(name="thread", kind=PathId, description="The thread id.")
_PRINCIPAL: Final = Param(name="name", kind=PathId, description="The principal's name.")
_IN_FILE: Final = "The server reads its identities from a tokens file, not a store."

ROUTES: Final[tuple[Route, ...]] = (
    Route(
        path="/v1/interrupts",
        method="GET",
        handler=list_interrupts,
        summary="List pending interrupts (the inbox), oldest first",
        query=InterruptsQuery,
        answers={200: _json(InterruptPage, "A page."), 404: _error("No such app.")},
    ),
    # Before /v1/interrupts/{id}: routes are matched in this order.
    Route(
        path="/v1/interrupts/counts",
        method="GET",
        handler=count_interrupts,
        summary="Count pending interrupts per tool (the inbox's filters)",
        description=(
            "Counted through the store's index, for the tools in the identity's scope. An "
            "identity limited to some thread prefixes must pass a thread within them: "
            "without one the answer is 403, since the index counts all threads or one."
        ),
        query=InboxQuery,
        answers={200: _json(InterruptCounts, "The counts."), 404: _error("No such app.")},
    ),
    Route(
        path="/v1/interrupts/{id}",
        method="GET",
        handler=get_interrupt,
        summary="One interrupt with its thread's context and audit trail",
        path_params=(_ID,),
        answers={
            200: _json(InterruptDetail, "The interrupt."),
            404: _error("No such interrupt (or none within the identity's scopes)."),
        },
    ),
    Route(
        path="/v1/interrupts/{id}/decision",
        method="POST",
        handler=post_decision,
        summary="Decide an interrupt",
        description=(
            "Records the authenticated identity's answer, exactly once, then continues the "
            "thread in the background. The body carries the payload hash of the question as "
            "shown; the Idempotency-Key header makes a retried request safe."
        ),
        path_params=(_ID,),
        headers=(
            Param(
                name="Idempotency-Key",
                kind=IdempotencyKey,
                description="New for each decision; the same key and body is a replay.",
            ),
        ),
        body=DecisionRequest,
        body_required=True,
        answers={
            200: _json(DecisionResult, "The same request again: the recorded decision."),
            201: _json(DecisionResult, "Recorded."),
            404: _error("No such interrupt (or none within the identity's scopes)."),
            409: _error(
                "Someone decided first (their decision is included), or the thread is busy."
            ),
            412: _error("The question changed since it was shown."),
            422: _error(
                "The body is not valid, the answer fails the question's schema (or cannot "
                "be stored), or the key was reused."
            ),
            429: _error("Too many decisions from this identity."),
        },
    ),
    Route(
        path="/v1/threads",
        method="GET",
        handler=list_threads,
        summary="List threads by app and id, e.g. the failed ones",
        query=ThreadsQuery,
        answers={200: _json(ThreadPage, "A page."), 404: _error("No such app.")},
    ),
    Route(
        path="/v1/threads/{thread}",
        method="GET",
        handler=get_thread,
        summary="A thread's latest state",
        path_params=(_THREAD,),
        query=ThreadQuery,
        answers={
            200: _json(ThreadView, "The thread."),
            404: _error("No such thread (or none within the identity's scopes)."),
        },
    ),
    Route(
        path="/v1/threads/{thread}/history",
        method="GET",
        handler=get_history,
        summary="A thread's checkpoints, newest first",
        path_params=(_THREAD,),
        query=HistoryQuery,
        answers={
            200: _json(HistoryPage, "A page."),
            404: _error("No such thread (or none within the identity's scopes) or checkpoint."),
        },
    ),
    Route(
        path="/v1/threads/{thread}/audit",
        method="GET",
        handler=get_audit,
        summary="A thread's audit log",
        path_params=(_THREAD,),
        query=AuditQuery,
        answers={
            200: _json(AuditPage, "A page."),
            404: _error("No such thread (or none within the identity's scopes)."),
        },
    ),
    Route(
        path="/v1/threads/{thread}/graph",
        method="GET",
        handler=get_thread_graph,
        summary="The thread's graph as Mermaid text, with where it stands marked",
        description=(
            'marks name nodes by path ("agent", "supervisor/researcher/tools"): waiting '
            "(a pending question's node, and every block holding it), failed (the next "
            "nodes of a failed thread), next, and done (ran in the current run). The "
            "drawing gives each marked node the class of its mark. Questions of tools "
            "outside the identity's scope are not marked."
        ),
        path_params=(_THREAD,),
        query=ThreadQuery,
        answers={
            200: _json(ThreadGraph, "The drawing and the marks."),
            404: _error("No such thread (or none within the identity's scopes)."),
        },
    ),
    Route(
        path="/v1/graph",
        method="GET",
        handler=get_app_graph,
        summary="An app's graph as Mermaid text",
        description=(
            "With several apps served, name one (app): without it the answer is 400, "
            "naming the apps. The drawing names the app's tools, so an identity limited to "
            "some thread prefixes is refused (403): it reads the graph of one of its threads."
        ),
        query=ThreadQuery,
        answers={200: _json(AppGraph, "The drawing."), 404: _error("No such app.")},
    ),
    Route(
        path="/v1/threads/{thread}/timeline",
        method="GET",
        handler=get_timeline,
        summary="A thread's timeline: its checkpoints, newest first, with what ran and changed",
        description=(
            "Each checkpoint with the tasks that ran since the one before it and the state "
            "keys they wrote, the state's changes since it (large values folded), the "
            "questions pending at it, its metadata, and the audit entries written from it "
            "until the next checkpoint. A page of `limit` checkpoints; pass `next` as "
            "`before` for older ones."
        ),
        path_params=(_THREAD,),
        query=TimelineQuery,
        answers={
            200: _json(TimelinePage, "A page."),
            404: _error("No such thread (or none within the identity's scopes) or checkpoint."),
            409: _error("The thread was written by another graph than the one served."),
        },
    ),
    Route(
        path="/v1/threads/{thread}/compare",
        method="GET",
        handler=compare_checkpoints,
        summary="The changes of a thread's state from one checkpoint to another",
        description=(
            "Without `to`, the thread's latest checkpoint; without `from`, the thread's "
            "first (so that, without either, the changes are the whole thread's). Large "
            "values are folded."
        ),
        path_params=(_THREAD,),
        query=CompareQuery,
        answers={
            200: _json(Comparison, "The changes."),
            404: _error("No such thread (or none within the identity's scopes) or checkpoint."),
            409: _error("The thread was written by another graph than the one served."),
        },
    ),
    Route(
        path="/v1/threads/{thread}/runs",
        method="POST",
        handler=post_run,
        summary="Start a turn with new input, or continue the thread",
        description=(
            "New input may start a thread, so its id must be printable on one line: no "
            "control character, line break or bidirectional control. The input is an "
            "object of the app's state keys."
        ),
        path_params=(Param(name="thread", kind=NewName, description="The thread id."),),
        body=RunRequest,
        answers={
            200: _json(RunAccepted, "With wait: the run stopped; the thread's view."),
            202: _json(RunAccepted, "Accepted; it runs in the background."),
            404: _error("No such thread or app."),
            409: _error("The thread waits on decisions, or is running."),
            422: _error("The body or its input is not valid."),
        },
    ),
    Route(
        path="/v1/threads/{thread}/pause",
        method="POST",
        handler=post_pause,
        summary="Ask whichever process runs the thread to pause it",
        path_params=(_THREAD,),
        query=ThreadQuery,
        body=PauseRequest,
        answers={
            202: _json(PauseAccepted, "Stored."),
            404: _error("No such thread."),
            422: _error("The body is not valid."),
        },
    ),
    Route(
        path="/v1/threads/{thread}/schema",
        method="GET",
        handler=get_state_schema,
        summary="The JSON Schema of the thread's state, and its graph's nodes",
        description=(
            "What an edit of a fork is checked against: an object with one property per "
            "state key. The nodes are those a fork may plan the thread as (as_node)."
        ),
        path_params=(_THREAD,),
        query=ThreadQuery,
        answers={
            200: _json(StateSchemaView, "The schema."),
            404: _error("No such thread (or none within the identity's scopes)."),
        },
    ),
    Route(
        path="/v1/threads/{thread}/checkpoints/{checkpoint}",
        method="GET",
        handler=get_checkpoint,
        summary="A thread's state at one of its checkpoints",
        description=(
            "The whole state, for an identity limited to some tools without the calls of "
            "the others (as the thread's view shows it)."
        ),
        path_params=(
            _THREAD,
            Param(name="checkpoint", kind=PathId, description="The checkpoint id."),
        ),
        query=ThreadQuery,
        answers={
            200: _json(CheckpointState, "The state."),
            404: _error("No such thread (or none within the identity's scopes) or checkpoint."),
            409: _error("The checkpoint was written by a graph this server cannot read."),
        },
    ),
    Route(
        path="/v1/threads/{thread}/fork",
        method="POST",
        handler=post_fork,
        summary="Fork the thread at a checkpoint into a new thread, maybe with its state edited",
        description=(
            "Admin only, by an identity that sees every tool, with both threads within its "
            "thread prefixes. The values replace their keys' whole values, checked against "
            "the state's schema (GET .../schema) first: an edit that does not fit is refused "
            "with every problem listed, and nothing is written. The source thread is not "
            "changed; both threads' audit logs record the fork and who made it. With run, "
            "the new thread continues in the background."
        ),
        path_params=(_THREAD,),
        body=ForkRequest,
        body_required=True,
        answers={
            201: _json(ForkResult, "Forked."),
            404: _error(
                "No such thread (or none within the identity's scopes), checkpoint or app."
            ),
            409: _error(
                "The new thread exists (thread_exists), or the checkpoint was written by a "
                "graph this server cannot read."
            ),
            422: _error(
                "The body is not valid, the values do not fit the state's schema "
                "(invalid_state: problems lists each), or as_node is no node of the graph "
                "(unknown_node)."
            ),
        },
    ),
    Route(
        path="/v1/me",
        method="GET",
        handler=get_me,
        summary="Who the token belongs to",
        answers={200: _json(IdentityView, "The identity.")},
    ),
    Route(
        path="/v1/deliveries",
        method="GET",
        handler=get_deliveries,
        summary="The notifier's latest delivery attempts (admin)",
        query=DeliveriesQuery,
        answers={200: _json(DeliveryPage, "The attempts.")},
    ),
    Route(
        path="/v1/principals",
        method="GET",
        handler=list_principals,
        summary="List the principals, by name (admin)",
        query=PrincipalsQuery,
        answers={200: _json(PrincipalPage, "A page."), 409: _error(_IN_FILE)},
    ),
    Route(
        path="/v1/principals",
        method="POST",
        handler=create_principal,
        summary="Add a principal (admin)",
        body=NewPrincipal,
        body_required=True,
        answers={
            201: _json(PrincipalView, "Added."),
            409: _error(
                "A principal has that name (compared case-folded), or another has that "
                "e-mail address or Slack user (contact_taken), or: " + _IN_FILE
            ),
            422: _error("The body is not valid (an e-mail address or Slack user id too)."),
        },
    ),
    Route(
        path="/v1/principals/{name}",
        method="POST",
        handler=change_principal,
        summary=(
            "Change a principal: its role, groups, display name, e-mail address, Slack user; "
            "disable or enable it (admin)"
        ),
        description=(
            "What the body leaves out stays; an empty email or slack_user clears it. A "
            "disabled principal's tokens are refused by every server that follows the store, "
            "until it is enabled again."
        ),
        path_params=(_PRINCIPAL,),
        body=PrincipalChange,
        body_required=True,
        answers={
            200: _json(PrincipalView, "Changed."),
            404: _error("No such principal."),
            409: _error(
                "Another principal has that e-mail address or Slack user (contact_taken), "
                "or: " + _IN_FILE
            ),
            422: _error("The body is not valid (an e-mail address or Slack user id too)."),
        },
    ),
    Route(
        path="/v1/principals/{name}/tokens/revoke",
        method="POST",
        handler=revoke_principal_tokens,
        summary="Revoke every token of a principal (admin)",
        path_params=(_PRINCIPAL,),
        answers={
            200: _json(RevokedTokens, "The tokens this revoked."),
            404: _error("No such principal."),
            409: _error(_IN_FILE),
        },
    ),
    Route(
        path="/v1/tokens",
        method="GET",
        handler=list_tokens,
        summary="List the tokens, by id, revoked and expired ones included (admin)",
        query=TokensQuery,
        answers={200: _json(TokenPage, "A page."), 409: _error(_IN_FILE)},
    ),
    Route(
        path="/v1/tokens",
        method="POST",
        handler=create_token,
        summary="Make a token for a principal; the answer shows it, once (admin)",
        description=(
            "A token can narrow what its principal may do (a lower role, some tools, some "
            "thread prefixes), never widen it. Every server that follows the store takes it "
            "within its refresh time."
        ),
        body=NewToken,
        body_required=True,
        answers={
            201: _json(IssuedTokenView, "Made: the token, shown this once, and its record."),
            404: _error("No such principal."),
            409: _error(_IN_FILE),
            422: _error("The body is not valid, or the role is above the principal's."),
        },
    ),
    Route(
        path="/v1/tokens/{id}/revoke",
        method="POST",
        handler=revoke_token,
        summary="Revoke a token (admin)",
        description="Every server that follows the store refuses it within its refresh time.",
        path_params=(Param(name="id", kind=PathId, description="The token's id."),),
        answers={
            200: _json(RevokedTokens, "The token, or nothing if it was revoked already."),
            404: _error("No such token."),
            409: _error(_IN_FILE),
        },
    ),
    Route(
        path="/v1/events",
        method="GET",
        handler=get_events,
        summary="Server-sent events: interrupts created, decided, expired; runs finished",
        description=(
            "A text/event-stream. Each event's id is a position: reconnect with "
            "Last-Event-ID (or ?last_event_id=) to continue after it."
        ),
        query=EventsQuery,
        headers=(
            Param(
                name="Last-Event-ID",
                kind=Text,
                description="Continue after this event id.",
                required=False,
            ),
        ),
        answers={200: Answer(description="The stream.", body=None, media_type="text/event-stream")},
    ),
)
"""Every ``/v1`` route, in the order they are matched."""
