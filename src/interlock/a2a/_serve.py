"""An interlock App served to A2A clients: its executor, its card, and the ASGI app.

A message without a task starts one: a run of the App on the thread whose id is the task's
id. A question stops the run and leaves the task ``auth-required`` (an approval) or
``input-required``; a message on that task answers it through `App.decide`, with the caller's
identity as the actor, before the SDK hands the task back to `InterlockExecutor`, which
continues the thread. See `_serve_tasks` for the status mapping and `_serve_answers` for the
answer's shape.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Final

import anyio
import httpx
from a2a.auth.user import User
from a2a.helpers.proto_helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import (
    DefaultServerCallContextBuilder,
    create_agent_card_routes,
    create_jsonrpc_routes,
)
from a2a.server.tasks import (
    BasePushNotificationSender,
    InMemoryPushNotificationConfigStore,
    TaskUpdater,
)
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    InvalidParamsError,
    Message,
    SecurityRequirement,
    SecurityScheme,
    SendMessageRequest,
    StringList,
    Task,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from .._errors import ThreadBusy
from ..agents import Agent, ToolAgent
from ..runtime import App, Interrupt
from ..server import Authenticator, Identity
from ._serve_answers import OUTCOME_KEY, Outcome, decide_message
from ._serve_tasks import (
    CONTEXT_KEY,
    IDENTITY_KEY,
    ThreadTasks,
    agent_message,
    answer_of,
    asked_in,
    identity_of,
    question_message,
    question_state,
)

__all__ = ["InterlockExecutor", "a2a_app", "agent_card"]

InputBuilder = Callable[[RequestContext], Any]
"""Builds a run's input from the message that starts a task."""

_POLL: Final = 0.1
"""Seconds between two looks at a thread another process is continuing."""


def _messages_input(context: RequestContext) -> Any:
    return {"messages": [context.get_user_input()]}


class _Elsewhere(Exception):
    """A thread another process continued failed, or did not stop in time: its task fails
    with this message, and the thread is left as it is."""


class InterlockExecutor(AgentExecutor):
    """Runs an App's threads for the A2A SDK: one task is one thread, of the same id.

    Args:
        app: The App (an agent compiled with a store; a SQLite or PostgreSQL store keeps the
            tasks across restarts).
        input: Builds a run's input from the message that starts a task (default:
            ``{"messages": [its text]}``, an agent's input).
        wait: How long (seconds) to wait for a thread another process continues (workers, or
            the approval server after a decision made in its web inbox) to stop again.
    """

    def __init__(
        self, app: App[Any], *, input: InputBuilder | None = None, wait: float = 300.0
    ) -> None:
        if not isinstance(app, App):
            raise TypeError(f"app must be an interlock App, not {type(app).__name__}")
        if isinstance(wait, bool) or not isinstance(wait, int | float) or not wait > 0:
            raise ValueError(f"wait must be a number of seconds above 0, not {wait!r}")
        self.app = app
        self._input = input or _messages_input
        self._wait = float(wait)

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Start the task's run, or continue its thread after the answers the message gave."""
        task_id, context_id = str(context.task_id), str(context.context_id)
        updater = TaskUpdater(event_queue, task_id, context_id)
        metadata: dict[str, Any] = {CONTEXT_KEY: context_id}
        outcome = context.call_context.state.get(OUTCOME_KEY)
        notes = outcome.notes() if isinstance(outcome, Outcome) else ""
        if context.current_task is None and context.message is not None:
            # The task first (the SDK refuses a status before it): a message it cannot make a
            # task of (no parts, empty text) is the SDK's to refuse, before any run.
            await event_queue.enqueue_event(new_task_from_user_message(context.message))
        try:
            if context.current_task is None:
                identity = identity_of(context.call_context)
                if identity is not None:
                    metadata["started_by"] = identity.name
                await updater.start_work()
                result = await self.app.run(self._input(context), thread=task_id, metadata=metadata)
                status: str = result.status
                interrupts, values = result.interrupts, result.values
            else:
                await updater.start_work(
                    agent_message(task_id, context_id, notes) if notes else None
                )
                status, interrupts, values = await self._continue(task_id, metadata)
        except _Elsewhere as exc:  # another process ran the thread, and it did not end well
            await updater.failed(agent_message(task_id, context_id, f"{notes}{exc}"))
            return
        except Exception as exc:  # the run failed: the task says why, for a person
            # The thread shows it too (``failed``, with why), to every surface and to a server
            # that rebuilds the task from it after a restart.
            await self.app.record_failure(task_id, exc)
            why = f"The agent failed: {type(exc).__name__}: {exc}"
            await updater.failed(agent_message(task_id, context_id, f"{notes}{why}"))
            return
        await self._report(updater, status, interrupts, values, notes)

    async def _continue(
        self, thread: str, metadata: Mapping[str, Any]
    ) -> tuple[str, list[Interrupt], dict[str, Any]]:
        """Run the thread on after a decision; or, when another process does, wait for it."""
        snapshot = await self.app.get_state(thread)
        if any(i.needs_answer for i in snapshot.interrupts):
            # Still waiting (a quorum's vote was recorded, or another question waits).
            return snapshot.status, snapshot.interrupts, snapshot.values
        if await self.app.continued_by() == "caller":
            try:
                result = await self.app.resume(thread, metadata=metadata)
                return result.status, result.interrupts, result.values
            except ThreadBusy:
                pass  # another process continues it: wait below
        deadline = time.monotonic() + self._wait
        while True:
            snapshot = await self.app.get_state(thread)
            if snapshot.status == "failed":
                why = snapshot.metadata.get("error") or "the run failed"
                raise _Elsewhere(f"The agent failed: {why}")
            if snapshot.status != "ready":
                return snapshot.status, snapshot.interrupts, snapshot.values
            if time.monotonic() > deadline:
                raise _Elsewhere(
                    f"Thread {thread} did not stop within {self._wait:g} s of its decision, "
                    "continued by another process; its state is that thread's "
                    "(interlock show, the web inbox)."
                )
            await anyio.sleep(_POLL)

    async def _report(
        self,
        updater: TaskUpdater,
        status: str,
        interrupts: list[Interrupt],
        values: Mapping[str, Any],
        notes: str,
    ) -> None:
        task_id, context_id = updater.task_id, updater.context_id
        if status == "done":
            answer = answer_of(values)
            message = agent_message(task_id, context_id, answer)
            await updater.add_artifact(list(message.parts), artifact_id="answer", name="answer")
            await updater.complete(agent_message(task_id, context_id, f"{notes}{answer}"))
            return
        message = question_message(self.app, task_id, context_id, interrupts, notes)
        await updater.update_status(question_state(interrupts), message)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Cancel the task: its pending questions stay in the thread, for a person to see."""
        updater = TaskUpdater(event_queue, str(context.task_id), str(context.context_id))
        await updater.cancel()


class _Handler(DefaultRequestHandler):
    """The SDK's request handler, recording a message's answers before the task goes on."""

    def __init__(self, app: App[Any], tasks: ThreadTasks, **kwargs: Any) -> None:
        super().__init__(task_store=tasks, **kwargs)
        self._app = app
        self._tasks = tasks

    async def _answers(self, params: SendMessageRequest, context: ServerCallContext) -> None:
        identity = identity_of(context)
        if params.message.task_id:
            shown = await self._tasks.get(params.message.task_id, context)
            if shown is None:
                return  # no such task for this caller: the SDK says so
            await decide_message(self._app, params.message, context, asked_in(shown))
        elif identity is not None and not identity.can("approver"):
            raise InvalidParamsError(
                message=f"{identity.name} is a {identity.role}: starting a task needs the "
                "approver role",
                data={"error": "not_authorized", "rule": "role"},
            )

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Message | Task:
        await self._answers(params, context)
        result: Message | Task = await super().on_message_send(params, context)
        return result

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any, None]:
        await self._answers(params, context)
        async for event in super().on_message_send_stream(params, context):
            yield event


class _Caller(User):
    """The SDK's view of an authenticated identity."""

    def __init__(self, identity: Identity) -> None:
        self._identity = identity

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self._identity.name


class _Contexts(DefaultServerCallContextBuilder):
    """Call contexts that carry the identity the guard authenticated."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        identity = request.scope.get(IDENTITY_KEY)
        if isinstance(identity, Identity):
            context.state[IDENTITY_KEY] = identity
            context.user = _Caller(identity)
        headers = context.state.get("headers")
        if isinstance(headers, dict):  # the bearer token stays out of what the executor sees
            headers.pop("authorization", None)
        return context


class _Guard:
    """Refuses a call without a token the authenticator knows (401); the card stays public."""

    def __init__(self, app: ASGIApp, *, auth: Authenticator, public: frozenset[str]) -> None:
        self.app = app
        self._auth = auth
        self._public = public

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in self._public:
            header = dict(scope["headers"]).get(b"authorization")
            identity = self._auth.authenticate(header.decode("latin-1") if header else None)
            if identity is None:
                body = json.dumps(
                    {"error": "send Authorization: Bearer <token> with a token this server knows"}
                ).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b"Bearer"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
            scope[IDENTITY_KEY] = identity
        await self.app(scope, receive, send)


def agent_card(
    agent: Agent,
    *,
    url: str,
    version: str = "1.0.0",
    description: str | None = None,
    streaming: bool = True,
    push_notifications: bool = False,
    bearer: bool = False,
) -> AgentCard:
    """The A2A card of an agent: its name and description, a skill per tool.

    Args:
        agent: The agent (a `ToolAgent` lists its tools as skills; another agent is one skill).
        url: Where its JSON-RPC endpoint is reached (what `a2a_app` serves at ``rpc_path``).
        version: The agent's version, for its callers.
        description: What it does (default: the agent's description, or its name).
        streaming: Whether it offers ``message/stream`` (`a2a_app` serves it either way).
        push_notifications: Whether it sends push notifications (`a2a_app` keeps their
            configurations in memory: a restart forgets them).
        bearer: Whether calls need ``Authorization: Bearer <token>`` (`a2a_app` with ``auth=``).

    >>> from interlock.agents import ScriptedModel, ToolAgent, tool
    >>> @tool
    ... def add(a: int, b: int) -> int:
    ...     \"\"\"Add two numbers.\"\"\"
    ...     return a + b
    >>> card = agent_card(ToolAgent("calc", ScriptedModel(["4"]), [add]), url="http://calc/")
    >>> for skill in card.skills:
    ...     print(skill.id, "-", skill.description)
    add - Add two numbers.
    """
    if not isinstance(agent, Agent):
        raise TypeError(f"agent must be an interlock Agent, not {type(agent).__name__}")
    about = description or agent.description or f"The interlock agent {agent.name}."
    if isinstance(agent, ToolAgent) and agent.tools:
        skills = [
            AgentSkill(
                id=name,
                name=name,
                description=tool.description or name,
                tags=["tool"],
            )
            for name, tool in agent.tools.items()
        ]
    else:
        skills = [AgentSkill(id=agent.name, name=agent.name, description=about, tags=["agent"])]
    card = AgentCard(
        name=agent.name,
        description=about,
        version=version,
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=streaming, push_notifications=push_notifications),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=skills,
    )
    if bearer:
        card.security_schemes["bearer"].CopyFrom(
            SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer"))
        )
        card.security_requirements.append(
            SecurityRequirement(schemes={"bearer": StringList(list=[])})
        )
    return card


def a2a_app(
    app: App[Any],
    card: AgentCard,
    *,
    auth: Authenticator | None = None,
    rpc_path: str = "/",
    input: InputBuilder | None = None,
    wait: float = 300.0,
    push_urls: Callable[[str], Awaitable[bool]] | None = None,
) -> Starlette:
    """An ASGI app that serves ``app`` to A2A clients: JSON-RPC at ``rpc_path``, the card at
    ``/.well-known/agent-card.json``.

    Args:
        app: The App whose threads the tasks are.
        card: Its card (`agent_card`); push notifications are sent when its capabilities say so.
        auth: Who may call (`interlock.server.TokenAuth`, `StoreAuth`...): every call but the
            card's needs a bearer token it knows, and its identity decides. None: anyone may
            call, and decisions name no actor.
        rpc_path: Where the JSON-RPC endpoint is.
        input: Builds a run's input from the message that starts a task (see
            `InterlockExecutor`).
        wait: As for `InterlockExecutor`.
        push_urls: Whether a push notification URL a caller gives may be used (the SDK's
            ``push_url_validator``): the server posts to the URLs its callers name, so a
            server whose callers are not all trusted says which it accepts.

    Push notifications are sent when the card says so (``capabilities.push_notifications``):
    their configurations are kept in memory, so a restart forgets them (the tasks themselves
    are kept in the App's store).
    """
    if not isinstance(card, AgentCard):
        raise TypeError(f"card must be an a2a.types.AgentCard, not {type(card).__name__}")
    executor = InterlockExecutor(app, input=input, wait=wait)
    push = card.capabilities.push_notifications
    client = httpx.AsyncClient() if push else None
    configs = InMemoryPushNotificationConfigStore() if push else None
    sender = BasePushNotificationSender(client, configs) if client is not None and configs else None
    handler = _Handler(
        app,
        ThreadTasks(app),
        agent_executor=executor,
        agent_card=card,
        push_config_store=configs,
        push_sender=sender,
        push_url_validator=push_urls,
    )

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await handler.aclose()
            if client is not None:
                await client.aclose()

    routes = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, rpc_path, context_builder=_Contexts()),
    ]
    served = Starlette(routes=routes, lifespan=lifespan)
    if auth is not None:
        served.add_middleware(_Guard, auth=auth, public=frozenset({AGENT_CARD_WELL_KNOWN_PATH}))
    return served
