"""A remote A2A agent as a tool of an interlock agent.

`remote_agent` makes a `Tool` that hands the model's request to an agent on another machine
over the A2A protocol (the official ``a2a-sdk`` client) and answers with what the remote task
produced. A call goes through these stages, each safe to repeat when the tool re-runs (a
task re-runs from its first line when an answer arrives or a process resumes the thread):

1. **Send.** The request goes out as a new message, sent without waiting for the task to
   finish, inside a dangerous `effect`: ``started`` is recorded before the message leaves and
   the remote task id, with its context id, right after it is accepted. A re-run reads the
   recorded id and never sends a second message; a crash between the two records becomes a
   ``reconcile`` question (its info names the context id the message carried, the same on
   every run of the task, so a person can look the task up on the remote side).
2. **Wait.** The tool asks for the task (``tasks/get``) until it leaves ``submitted`` and
   ``working``, a short delay at first, then up to ``poll_interval`` between requests.
3. **Ask.** ``input-required`` or ``auth-required`` becomes an interlock question at
   ``.../tool:NAME:CALL/a2a:TASK``, keyed by the remote status message, whose info carries
   that message's text and data parts. The run stops there, like any question: it is in the
   inbox, decided once, under the authority given.
4. **Answer.** The decision is sent to the remote task as a message on it (a string as a text
   part, anything else as a data part), once (an effect named by the question), and the tool
   waits again (stage 2): a remote agent may ask several times.
5. **End.** ``completed`` answers the call with the task's artifacts (their text parts, and
   their data parts as JSON), or its status message when it has none; ``failed``,
   ``rejected`` and ``canceled`` raise `RemoteTaskFailed`, whose message the model reads.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Final

import anyio
import httpx
from a2a.client import A2AClientError, Client, ClientConfig, ClientFactory
from a2a.helpers import get_data_parts, get_text_parts, new_data_part, new_text_part
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from a2a.utils.errors import TaskNotFoundError

from .._errors import InterlockError
from ..agents import Tool
from ..runtime import Authority, Segment, child_scope, current_address, effect, effect_key
from ..runtime import interrupt as ask_person

__all__ = [
    "A2ACallError",
    "RemoteAgentUnreachable",
    "RemoteTaskFailed",
    "RemoteTaskLost",
    "remote_agent",
]

_ASKING: Final = {
    TaskState.TASK_STATE_INPUT_REQUIRED: "input-required",
    TaskState.TASK_STATE_AUTH_REQUIRED: "auth-required",
}
"""The states in which the remote task waits for the caller, as A2A names them."""
_ENDED: Final = {
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_REJECTED: "rejected",
    TaskState.TASK_STATE_CANCELED: "canceled",
}
"""The states that end the remote task without a result."""
_ANSWER_SCHEMA: Final = {
    "anyOf": [
        {"type": "string", "minLength": 1},
        {"type": "object"},
        {"type": "array"},
        {"type": "boolean"},
        {"type": "number"},
    ]
}
"""What a person may answer a remote question with (anything but nothing)."""
_NAMESPACE: Final = uuid.UUID("9d0f6a3e-4f7b-5c36-9a8e-1f2b3c4d5e6f")
"""Where the context and message ids a call derives from its effect key live."""


class A2ACallError(InterlockError):
    """Raised when a call of a remote A2A agent cannot give the model an answer."""

    def __init__(self, message: str, *, agent: str, url: str, task: str | None = None) -> None:
        super().__init__(message)
        self.agent = agent
        """The tool's name."""
        self.url = url
        """The remote agent's base URL."""
        self.task = task
        """The remote task id, once there is one."""


class RemoteTaskFailed(A2ACallError):
    """Raised when the remote task ends ``failed``, ``rejected`` or ``canceled``."""

    def __init__(
        self, message: str, *, agent: str, url: str, task: str, state: str, reason: str
    ) -> None:
        super().__init__(message, agent=agent, url=url, task=task)
        self.state = state
        """How the task ended: ``failed``, ``rejected`` or ``canceled``."""
        self.reason = reason
        """The text of the remote status message (empty when it gave none)."""


class RemoteTaskLost(A2ACallError):
    """Raised when the remote agent no longer knows the task the call is waiting on."""


class RemoteAgentUnreachable(A2ACallError):
    """Raised when the remote agent cannot be reached for longer than the call allows."""


@dataclass(frozen=True, kw_only=True)
class _Remote:
    """One remote agent, as its tool calls it."""

    name: str
    """The tool's name (in addresses: ``tool:NAME:CALL``)."""
    url: str
    """The remote agent's base URL (its card is at ``/.well-known/agent-card.json``)."""
    client: Client | None
    """A client the caller made and owns, or None: each run of the tool makes its own."""
    poll_interval: float
    """The longest wait between two requests for the task's state, in seconds."""
    unreachable_after: float
    """How long the remote may stay unreachable while the call waits, in seconds."""
    authority: Authority | None
    """Who may answer the remote agent's questions."""

    async def call(self, request: str) -> str:
        """The tool's body: send ``request`` (once), then wait, ask and answer until the end."""
        async with self._client() as client:
            base = effect_key(f"a2a:{self.name}")
            sent: dict[str, str] = await effect(
                f"a2a:{self.name}",
                self._send,
                client,
                request,
                base,
                reconcile_info=self._reconcile_info(request, base),
            )
            if isinstance(sent, dict) and "message" in sent:
                return str(sent["message"])  # the remote answered at once, without a task
            if not (isinstance(sent, dict) and sent.get("task") and sent.get("context")):
                # Only a person's answer to a reconcile question can record anything else.
                raise A2ACallError(
                    f"the call of the remote agent {self.name!r} ({self.url}) was reconciled "
                    f"with {sent!r:.200}, which names no remote task; answer a reconcile "
                    'question with {"result": {"task": TASK_ID, "context": CONTEXT_ID}}',
                    agent=self.name,
                    url=self.url,
                )
            task_id, context_id = str(sent["task"]), str(sent["context"])
            answered: set[str] = set()
            while True:
                task = await self._wait(client, task_id, answered)
                state = task.status.state
                if state == TaskState.TASK_STATE_COMPLETED:
                    return _result(task)
                if state in _ENDED:
                    raise self._ended(task, _ENDED[state])
                if state not in _ASKING:
                    raise A2ACallError(
                        f"the remote agent {self.name!r} ({self.url}) put task {task_id} in a "
                        f"state this caller does not know ({TaskState.Name(state)}); look at "
                        "the task on the remote side, then answer the model or retry the call",
                        agent=self.name,
                        url=self.url,
                        task=task_id,
                    )
                question = _question_id(task)
                with child_scope(Segment("a2a", task_id)):
                    answer = ask_person(
                        self._question(task, _ASKING[state]),
                        key=f"{task_id}/{question}",
                        schema=_ANSWER_SCHEMA,
                        authority=self.authority,
                    )
                _sent_to: str = await effect(
                    f"a2a:{self.name}:answer:{question}",
                    self._answer,
                    client,
                    task_id,
                    context_id,
                    answer,
                    f"{base}/{question}",
                )
                answered.add(question)

    @contextlib.asynccontextmanager
    async def _client(self) -> AsyncIterator[Client]:
        """The caller's client, or one made for this run of the tool and closed after it."""
        if self.client is not None:
            yield self.client
            return
        made = await self._reach(
            lambda: ClientFactory(ClientConfig(streaming=False, polling=True)).create_from_url(
                self.url
            ),
            None,
            retry=_unreachable,
        )
        try:
            yield made
        finally:
            await made.close()

    async def _send(self, client: Client, request: str, base: str) -> dict[str, str]:
        """Send the request as a new message; what to record: the task's ids, or the remote's
        direct answer when it made no task."""
        message = Message(
            role=Role.ROLE_USER,
            message_id=_derived(base, "message"),
            context_id=_derived(base, "context"),
            parts=[new_text_part(request)],
        )
        # Tried again only when it never left: a connection refused (a message that may have
        # arrived is the reconcile question's business, never a silent second request).
        first: StreamResponse = await self._reach(
            lambda: _first_event(client, message), None, retry=_not_sent
        )
        if first.HasField("message"):
            return {"message": _text(first.message.parts)}
        task = _task_of(first)
        if task is None:
            raise A2ACallError(
                f"the remote agent {self.name!r} ({self.url}) accepted the request but named "
                "no task; it does not follow the A2A protocol, so this call cannot wait on it",
                agent=self.name,
                url=self.url,
            )
        return {"task": task[0], "context": task[1]}

    async def _answer(
        self, client: Client, task_id: str, context_id: str, answer: Any, base: str
    ) -> str:
        """Send a person's answer to the remote task, as a message on it."""
        part: Part = new_text_part(answer) if isinstance(answer, str) else new_data_part(answer)
        message = Message(
            role=Role.ROLE_USER,
            message_id=_derived(base, "answer"),
            context_id=context_id,
            task_id=task_id,
            parts=[part],
        )
        await self._reach(lambda: _first_event(client, message), task_id, retry=_not_sent)
        return task_id

    async def _wait(self, client: Client, task_id: str, answered: set[str]) -> Task:
        """Ask for the task until it leaves ``submitted`` and ``working`` (and the questions
        ``answered`` already: a remote may show one a moment after it took the answer)."""
        delay = 0.02
        while True:
            task: Task = await self._reach(
                lambda: client.get_task(GetTaskRequest(id=task_id)), task_id, retry=_unreachable
            )
            state = task.status.state
            working = state in (
                TaskState.TASK_STATE_SUBMITTED,
                TaskState.TASK_STATE_WORKING,
                TaskState.TASK_STATE_UNSPECIFIED,
            )
            if not working and not (state in _ASKING and _question_id(task) in answered):
                return task
            await anyio.sleep(delay)
            delay = min(delay * 2, self.poll_interval)

    async def _reach(
        self,
        request: Any,
        task_id: str | None,
        *,
        retry: Callable[[A2AClientError], bool],
    ) -> Any:
        """Make ``request()``; while the remote cannot be reached (``retry`` says so of a
        failure), try again for up to ``unreachable_after`` seconds."""
        since = time.monotonic()
        delay = 0.05
        while True:
            try:
                return await request()
            except TaskNotFoundError as exc:
                raise RemoteTaskLost(
                    f"the remote agent {self.name!r} ({self.url}) no longer knows task "
                    f"{task_id}: it may have lost its tasks in a restart; ask the model to "
                    "call it again (a new task), or look for the work on the remote side",
                    agent=self.name,
                    url=self.url,
                    task=task_id,
                ) from exc
            except A2AClientError as exc:
                if not retry(exc):
                    raise
                if time.monotonic() - since > self.unreachable_after:
                    left = "" if task_id is None else f" (its task {task_id} is left as it is)"
                    raise RemoteAgentUnreachable(
                        f"the remote agent {self.name!r} at {self.url} could not be reached "
                        f"for {self.unreachable_after:g} s ({exc}){left}; check that it runs "
                        "and the URL is right, then call it again",
                        agent=self.name,
                        url=self.url,
                        task=task_id,
                    ) from exc
                await anyio.sleep(delay)
                delay = min(delay * 2, self.poll_interval)

    def _question(self, task: Task, state: str) -> dict[str, Any]:
        """What a person sees of the remote agent's question."""
        parts = task.status.message.parts
        text = _text_only(parts)
        return {
            "type": "a2a",
            "question": text
            or f"The remote agent {self.name!r} needs {state.replace('-', ' ')} to go on.",
            "agent": self.name,
            "url": self.url,
            "task": task.id,
            "context": task.context_id,
            "state": state,
            "text": get_text_parts(parts),
            "data": get_data_parts(parts),
            "address": str(current_address()),  # asked inside the task's own level
        }

    def _reconcile_info(self, request: str, base: str) -> dict[str, Any]:
        """What a person reconciling an unrecorded send is shown, to find the remote task."""
        context = _derived(base, "context")
        return {
            "question": (
                f"The request to the remote agent {self.name!r} ({self.url}) was sent, but "
                "whether the remote accepted it was never recorded (the process stopped). "
                f"Look for a task in context {context} on the remote side: answer "
                '{"result": {"task": TASK_ID, "context": "' + context + '"}} if there is '
                'one, or "retry" to send the request again.'
            ),
            "agent": self.name,
            "url": self.url,
            "request": request,
            "context": context,
        }

    def _ended(self, task: Task, state: str) -> RemoteTaskFailed:
        reason = _text(task.status.message.parts)
        told = f": {reason}" if reason else " without a reason"
        return RemoteTaskFailed(
            f"the remote agent {self.name!r} ({self.url}) ended task {task.id} {state}{told}",
            agent=self.name,
            url=self.url,
            task=task.id,
            state=state,
            reason=reason,
        )


def remote_agent(
    name: str,
    url: str,
    *,
    description: str | None = None,
    client: Client | None = None,
    authority: Authority | None = None,
    poll_interval: float = 2.0,
    unreachable_after: float = 60.0,
) -> Tool:
    """A remote A2A agent as a tool: the model sends a request, the remote task's result
    comes back.

    Put it in a `ToolAgent`'s tools like any tool; the agent's `ApprovalPolicy` decides each
    call by ``name``. While the remote task waits for its caller (``input-required`` or
    ``auth-required``), the run stops on a question at
    ``.../tool:NAME:CALL/a2a:TASK`` whose info shows the remote status message
    (``question``, ``text``, ``data``); the decision is sent to the remote task and the call
    waits on. The remote task id is recorded before the call waits, so a crash or a restart
    of either side continues the same task. See the module's docstring for the stages.

    Args:
        name: What the model calls the tool (letters, digits, ``_`` and ``-``).
        url: The remote agent's base URL; its agent card is read from there.
        description: What the tool does, for the model (default: a sentence naming it).
        client: An ``a2a.client.Client`` to call with (auth interceptors, a transport of your
            choice); you close it. Without one, each run of the tool makes a JSON-RPC or
            HTTP+JSON client from the agent card at ``url``, and closes it.
        authority: Who may answer the remote agent's questions (as for any question).
        poll_interval: The longest wait, in seconds, between two requests for the remote
            task's state while it works.
        unreachable_after: How long, in seconds, the remote may be unreachable while the call
            waits before the call fails with `RemoteAgentUnreachable`.

    Returns:
        A `Tool` taking one argument, ``request`` (a string).

    Examples:
        >>> from interlock.a2a import remote_agent
        >>> deploy = remote_agent("deployer", "http://127.0.0.1:9999")
        >>> deploy.parameters["required"]
        ['request']
    """
    if poll_interval <= 0:
        raise ValueError(f"poll_interval must be above 0 seconds, not {poll_interval!r}")
    if unreachable_after < 0:
        raise ValueError(f"unreachable_after must be 0 seconds or more, not {unreachable_after!r}")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"url must be the remote agent's http:// or https:// URL, not {url!r}")
    remote = _Remote(
        name=name,
        url=url,
        client=client,
        poll_interval=poll_interval,
        unreachable_after=unreachable_after,
        authority=authority,
    )

    async def call(request: str) -> str:
        return await remote.call(request)

    parameters = {
        "type": "object",
        "properties": {
            "request": {"type": "string", "description": f"What to ask the {name} agent."}
        },
        "required": ["request"],
        "additionalProperties": False,
    }
    return Tool(
        name,
        description or f"Hand a request to the remote {name} agent (A2A) and get its answer.",
        parameters,
        call,
        # Not an effect as a whole: it asks questions (a dangerous tool's start would be
        # recorded and never finished); its send and its answers are effects of their own.
        dangerous=False,
    )


async def _first_event(client: Client, message: Message) -> StreamResponse:
    """Send ``message`` without waiting for the task to finish; the first thing answered."""
    request = SendMessageRequest(
        message=message, configuration=SendMessageConfiguration(return_immediately=True)
    )
    events = client.send_message(request)
    try:
        async for event in events:
            return event
    finally:
        await events.aclose()  # type: ignore[attr-defined]
    raise A2AClientError("the remote agent answered the message with nothing")


def _question_id(task: Task) -> str:
    """What tells a remote question apart from the task's others: its status message's id
    (the time of the status for a remote that sends none)."""
    return task.status.message.message_id or task.status.timestamp.ToJsonString()


def _task_of(event: StreamResponse) -> tuple[str, str] | None:
    """The task id and context id an event names, if any."""
    if event.HasField("task"):
        return event.task.id, event.task.context_id
    if event.HasField("status_update"):
        return event.status_update.task_id, event.status_update.context_id
    if event.HasField("artifact_update"):
        return event.artifact_update.task_id, event.artifact_update.context_id
    return None


def _unreachable(exc: A2AClientError) -> bool:
    """Whether the request failed on the way (worth trying again), not in the remote's answer."""
    return isinstance(exc.__cause__, httpx.TransportError)


def _not_sent(exc: A2AClientError) -> bool:
    """Whether the request failed before it could reach the remote (safe to send again)."""
    return isinstance(exc.__cause__, httpx.ConnectError)


def _derived(base: str, what: str) -> str:
    """An id for ``what`` of the call whose effect key is ``base``: the same on every run."""
    return str(uuid.uuid5(_NAMESPACE, f"{base}\x1f{what}"))


def _text_only(parts: Any) -> str:
    return "\n".join(t for t in get_text_parts(parts) if t)


def _text(parts: Any) -> str:
    """A message's or an artifact's parts as text: text as it is, data as JSON."""
    pieces = [t for t in get_text_parts(parts) if t]
    pieces += [json.dumps(d, sort_keys=True) for d in get_data_parts(parts)]
    return "\n".join(pieces)


def _result(task: Task) -> str:
    """A completed task's result: its artifacts, or its status message when it has none."""
    texts = [_text(artifact.parts) for artifact in task.artifacts]
    found = "\n".join(t for t in texts if t)
    return found or _text(task.status.message.parts)
