"""Approvals in Slack: each question posted as an interactive message, decided with its buttons.

The `Slack` channel is a `Channel` of the `Notifier` (which queues and retries its deliveries)
and attaches ``POST /slack/interactions`` to the server. The message in Slack is a view of the
durable question, never its record:

- Only one server process posts a question's message: the first to claim it in the store
  (``claim_channel_message``); the message's ``{"channel", "ts"}`` is stored with the claim.
- The message is rebuilt from the question's current state each time it is posted or updated,
  so a late, repeated or reordered event leaves it right. ``interrupt.decided``, ``expired``
  and ``cancelled`` come from the store's change feed: whichever surface decided, whichever
  process serves, the message is updated.
- Every decision goes through the server's one decision path (`decide_as`), with a nonce
  derived from the interaction: Slack delivering the same interaction twice records one
  decision. Refusals record nothing and are told to the person alone (an ephemeral message).
- The interactivity endpoint checks Slack's request signature on the raw body before reading
  anything, and answers within Slack's 3 seconds: decisions are made after the answer.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import logging
import os
import tomllib
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs

import anyio
import msgspec
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from .._errors import StoreError
from ..runtime import Question
from ..stores import PrincipalRecord
from ._channels import Receipt, RetryPolicy, Sender
from ._deciding import decide_as, find_question, identity_of, principal_directory
from ._errors import ApiError
from ._events import EventType, ServerEvent
from ._served import Served
from ._slack_blocks import (
    APPROVE,
    CONFIRM_BLOCK,
    EDIT,
    REJECT,
    RESPOND,
    decision_text,
    edit_confirmed,
    edit_modal,
    edited_arguments,
    is_tool_question,
    question_message,
    reason_of,
    reject_modal,
    respond_modal,
    response_of,
    when,
)
from ._state import ServerState

try:
    import aiohttp
    from slack_sdk.errors import SlackApiError
    from slack_sdk.signature import SignatureVerifier
    from slack_sdk.web.async_client import AsyncWebClient
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"the Slack channel needs the slack extra ({exc.name} is missing): "
        "pip install 'interlock[slack]'"
    ) from exc

__all__ = ["Slack", "SlackConfigError"]

_logger = logging.getLogger("interlock.slack")

SLACK_EVENTS: Final[frozenset[EventType]] = frozenset(
    {"interrupt.created", "interrupt.decided", "interrupt.expired", "interrupt.cancelled"}
)
"""The events the channel takes: a question asked, and the three ways it ends."""

INTERACTIONS_PATH: Final = "/slack/interactions"
"""Where Slack sends interactions (the app's Interactivity Request URL)."""

_RETRIED_ERRORS: Final = frozenset(
    {"ratelimited", "service_unavailable", "fatal_error", "internal_error", "request_timeout"}
)
"""Slack's error codes worth another attempt; any other refusal is for good."""
_REJECTED: Final = "The user rejected this tool call."
_FILE_KEYS: Final = (
    "channel",
    "routes",
    "token_env",
    "signing_secret_env",
    "base_url",
    "name",
    "timeout",
    "max_attempts",
    "backoff",
    "max_backoff",
)
_SECRET_KEYS: Final = {
    "token": "token_env",
    "bot_token": "token_env",
    "signing_secret": "signing_secret_env",
}


class SlackConfigError(ValueError):
    """A Slack configuration that cannot work: the message says which key and what to do."""


class _Refusal(Exception):
    """A person's action that records nothing; the text is told to them alone."""


def _destination(value: object, where: str) -> str:
    if not isinstance(value, str) or not value.strip() or not value.strip().isalnum():
        raise SlackConfigError(
            f"{where} must be a Slack channel id (C0123ABCD) or user id (U0123ABCD), "
            f"not {value!r}; Slack shows a channel's id at the bottom of its details"
        )
    return value.strip()


class Slack:
    """A Slack app that posts each question to a channel (or a person) and takes decisions.

    People decide with the message's buttons: **Approve**, **Reject** (a reason), **Edit**
    (the tool's arguments, checked against its schema) and **Respond** (a text answer given in
    place of the tool). Their Slack account is mapped to an interlock principal (its
    ``slack_user``, else its verified e-mail address), and the decision is that principal's,
    checked as on every surface. The message is updated wherever the question is decided,
    expires or is withdrawn.

    Give it to the server in a `Notifier`: ``create_app(app, auth=...,
    notifier=Notifier([Slack(...)]))``; the server mounts ``POST /slack/interactions``, the
    URL to set as the Slack app's Interactivity Request URL.

    Args:
        token: The bot token (``xoxb-...``); read it from the environment, never a file.
        signing_secret: The app's signing secret, which Slack signs interactions with.
        channel: Where questions go by default: a channel id (``C0123ABCD``), or a user id
            (``U0123ABCD``) for a direct message. None: only the routed tools are posted.
        routes: Tool name patterns (``fnmatch``, e.g. ``"refund*"``) to a channel or user id;
            the first pattern that matches a question's tool wins over ``channel``.
        base_url: Slack's Web API (a fake's, in tests).
        timeout: Seconds one call to Slack may take.
        max_attempts: Attempts per delivery (the `Notifier` retries with backoff).
        backoff: The wait before the second attempt, in seconds; it doubles.
        max_backoff: The longest wait between attempts, Slack's ``Retry-After`` included.
        name: The channel's name in the delivery log and the store's channel messages.
    """

    def __init__(
        self,
        *,
        token: str,
        signing_secret: str,
        channel: str | None = None,
        routes: Mapping[str, str] | None = None,
        base_url: str = "https://slack.com/api/",
        timeout: float = 10.0,
        max_attempts: int = 6,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        name: str = "slack",
    ) -> None:
        if not isinstance(token, str) or not token.strip():
            raise SlackConfigError(
                "token is empty: give the Slack app's bot token (xoxb-...), read from the "
                "environment"
            )
        if not isinstance(signing_secret, str) or not signing_secret.strip():
            raise SlackConfigError(
                "signing_secret is empty: give the Slack app's signing secret (Basic "
                "Information → App Credentials), read from the environment"
            )
        self.channel = None if channel is None else _destination(channel, "channel")
        self.routes: tuple[tuple[str, str], ...] = tuple(
            (str(pattern), _destination(to, f"the route of {pattern!r}"))
            for pattern, to in (routes or {}).items()
        )
        if self.channel is None and not self.routes:
            raise SlackConfigError(
                "Slack has nowhere to post: give channel= (a channel or user id) or routes="
            )
        if not base_url.startswith(("http://", "https://")):
            raise SlackConfigError(f"base_url must be an http(s) URL, not {base_url!r}")
        if not timeout > 0:
            raise SlackConfigError(f"timeout must be a positive number of seconds, not {timeout!r}")
        self.base_url = base_url if base_url.endswith("/") else base_url + "/"
        self.timeout = float(timeout)
        self.name = name
        self.events: frozenset[EventType] = SLACK_EVENTS
        self.retry = RetryPolicy(
            max_attempts=max_attempts, backoff=backoff, max_backoff=max_backoff
        )
        self._token = token.strip()
        self._verifier = SignatureVerifier(signing_secret.strip())
        self._state: ServerState | None = None
        self._client: AsyncWebClient | None = None
        self._group: anyio.abc.TaskGroup | None = None
        self._posting: set[str] = set()
        """Interrupts this process claimed and has not posted yet (its retries go on)."""

    def __repr__(self) -> str:
        return f"<Slack {self.name!r} channel={self.channel!r} routes={len(self.routes)}>"

    # --- configuration ----------------------------------------------------------------------

    @classmethod
    def from_file(cls, path: str | Path, *, environ: Mapping[str, str] | None = None) -> Slack:
        """The channel a TOML file describes; its secrets come from environment variables.

        The file names the variables (``token_env``, ``signing_secret_env``; by default
        ``SLACK_BOT_TOKEN`` and ``SLACK_SIGNING_SECRET``), never the secrets. A sketch of
        one (the how-to guide "Decide in Slack" reads one)::

            channel = "C0123ABCD"
            [routes]
            "refund*" = "C0FINANCE"

        Raises:
            SlackConfigError: The file cannot be read, holds a key it may not (named), or a
                variable it names is not set.
        """
        where = Path(path)
        try:
            data = tomllib.loads(where.read_text(encoding="utf-8"))
        except OSError as exc:
            raise SlackConfigError(f"cannot read {where}: {exc.strerror}") from exc
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise SlackConfigError(f"{where} is not valid TOML: {exc}") from exc
        return cls.from_config(data, environ=environ, source=str(where))

    @classmethod
    def from_config(
        cls,
        data: Mapping[str, Any],
        *,
        environ: Mapping[str, str] | None = None,
        source: str = "the Slack configuration",
    ) -> Slack:
        """The channel a parsed configuration describes (the keys of `from_file`'s file)."""
        env = os.environ if environ is None else environ
        for key in data:
            if key in _SECRET_KEYS:
                raise SlackConfigError(
                    f"{source}: {key} holds a secret, which a file must not: set it in an "
                    f"environment variable and name that variable with {_SECRET_KEYS[key]}"
                )
            if key not in _FILE_KEYS:
                raise SlackConfigError(
                    f"{source}: unknown key {key!r}; the keys are {', '.join(_FILE_KEYS)}"
                )
        routes = data.get("routes", {})
        if not isinstance(routes, Mapping):
            raise SlackConfigError(
                f'{source}: routes must be a table of tool patterns, e.g. [routes] "refund*" = '
                '"C0FINANCE"'
            )
        secrets: dict[str, str] = {}
        for key, default in (
            ("token_env", "SLACK_BOT_TOKEN"),
            ("signing_secret_env", "SLACK_SIGNING_SECRET"),
        ):
            variable = data.get(key, default)
            if not isinstance(variable, str) or not variable:
                raise SlackConfigError(f"{source}: {key} must name an environment variable")
            value = env.get(variable, "")
            if not value:
                raise SlackConfigError(
                    f"{source}: the environment variable {variable} ({key}) is not set; set it "
                    "to the Slack app's "
                    + ("bot token (xoxb-...)" if key == "token_env" else "signing secret")
                )
            secrets[key] = value
        options: dict[str, Any] = {}
        for key, kind in (
            ("base_url", str),
            ("name", str),
            ("timeout", (int, float)),
            ("max_attempts", int),
            ("backoff", (int, float)),
            ("max_backoff", (int, float)),
        ):
            if key in data:
                value = data[key]
                if isinstance(value, bool) or not isinstance(value, kind):
                    raise SlackConfigError(f"{source}: {key} has the wrong type ({value!r})")
                options[key] = value
        try:
            return cls(
                token=secrets["token_env"],
                signing_secret=secrets["signing_secret_env"],
                channel=data.get("channel"),
                routes=dict(routes),
                **options,
            )
        except (ValueError, TypeError) as exc:
            raise SlackConfigError(f"{source}: {exc}") from exc

    def destination(self, tool: str | None) -> str | None:
        """Where a question on ``tool`` is posted: the first matching route, else ``channel``."""
        if tool is not None:
            for pattern, to in self.routes:
                if fnmatch.fnmatchcase(tool, pattern):
                    return to
        return self.channel

    # --- the channel ------------------------------------------------------------------------

    def attach(self, state: ServerState) -> Sequence[BaseRoute]:
        """Keep the server's state (to read and decide questions); mount the interactions."""
        self._state = state
        return [Route(INTERACTIONS_PATH, self._interactions, methods=["POST"], name="slack")]

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[Sender]:
        """Open the Web API client and the task group decisions are made in."""
        async with aiohttp.ClientSession() as session, anyio.create_task_group() as group:
            self._client = AsyncWebClient(
                token=self._token,
                base_url=self.base_url,
                timeout=max(1, round(self.timeout)),
                session=session,
                # The notifier retries, with its backoff and on the record.
                retry_handlers=[],
            )
            self._group = group
            try:
                yield self._send
            finally:
                self._group = None
                self._client = None

    async def _send(self, event: ServerEvent, attempt: int) -> Receipt:
        if self._state is None or self._client is None:
            return Receipt(
                outcome="failed",
                detail="the Slack channel is not attached to a server: give it to create_app's "
                "notifier",
            )
        if event.interrupt_id is None:
            return Receipt(outcome="delivered", detail="not about a question")
        served = self._state.served.get(event.app)
        if served is None:
            return Receipt(outcome="delivered", detail=f"no served app {event.app!r}")
        try:
            if event.type == "interrupt.created":
                return await self._post(served, event)
            return await self._update(served, event.interrupt_id)
        except SlackApiError as exc:
            return _receipt(exc)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            return Receipt(
                outcome="retry", detail=f"Slack did not answer: {type(exc).__name__}: {exc}"
            )
        except StoreError as exc:
            # StoreClosed included: the server is stopping, and the retry is dropped with it.
            return Receipt(outcome="retry", detail=f"the store did not answer: {exc}")

    async def _post(self, served: Served, event: ServerEvent) -> Receipt:
        assert self._client is not None and event.interrupt_id is not None
        interrupt_id = event.interrupt_id
        to = self.destination(event.tool)
        if to is None:
            return Receipt(outcome="delivered", detail=f"no Slack channel for tool {event.tool!r}")
        if interrupt_id not in self._posting:
            claimed = await served.store.claim_channel_message(
                self.name, interrupt_id, thread=event.thread
            )
            if not claimed:
                return Receipt(
                    outcome="delivered", detail="posted by the server process that claimed it"
                )
            self._posting.add(interrupt_id)
        question = await self._question(interrupt_id)
        if question is None:
            self._posting.discard(interrupt_id)
            return Receipt(outcome="delivered", detail="the question is gone")
        served, found = question
        channel = to
        if to[0] in "UW":
            # A person: their direct message with the app (needs the im:write scope).
            opened = await self._client.conversations_open(users=to)
            channel = str(opened["channel"]["id"])
        message, final = self._message(served, found)
        sent = await self._client.chat_postMessage(
            channel=channel, text=message["text"], blocks=message["blocks"], unfurl_links=False
        )
        ts = str(sent["ts"])
        ref = json.dumps({"channel": str(sent["channel"]), "ts": ts})
        await served.store.set_channel_message(self.name, interrupt_id, ref=ref, state=final)
        self._posting.discard(interrupt_id)
        return Receipt(outcome="delivered", status=sent.status_code, detail=f"posted {ts}")

    async def _update(self, served: Served, interrupt_id: str) -> Receipt:
        stored = await served.store.get_channel_message(self.name, interrupt_id)
        if stored is None:
            return Receipt(outcome="delivered", detail="no Slack message for this question")
        if not stored.ref:
            # Claimed, not posted yet (or its posting still retries): wait for it.
            return Receipt(outcome="retry", detail="the question's Slack message is not posted yet")
        return await self._refresh(interrupt_id, stored.ref)

    async def _refresh(self, interrupt_id: str, stored: str) -> Receipt:
        """Rebuild the message of a question from its current state."""
        assert self._client is not None
        ref = json.loads(stored)
        question = await self._question(interrupt_id)
        if question is None:
            return Receipt(outcome="delivered", detail="the question is gone")
        served, found = question
        message, final = self._message(served, found)
        sent = await self._client.chat_update(
            channel=str(ref["channel"]),
            ts=str(ref["ts"]),
            text=message["text"],
            blocks=message["blocks"],
        )
        await served.store.set_channel_message(self.name, interrupt_id, state=final)
        return Receipt(outcome="delivered", status=sent.status_code, detail="updated")

    async def _question(self, interrupt_id: str) -> tuple[Served, Question] | None:
        assert self._state is not None
        try:
            return await find_question(self._state, None, interrupt_id)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def _message(self, served: Served, question: Question) -> tuple[dict[str, Any], str]:
        """The message for the question as it is now, and its final state ("": pending)."""
        view = served.view(question.interrupt, question.record.tool)
        link = served.link(question.id, question.thread)
        status = question.record.status
        decision = question.decision
        if status == "pending":
            votes = None
            if decision is not None and not decision.final:
                votes = decision_text(decision)
            elif view.approved_by:
                votes = f"Approved so far by {', '.join(view.approved_by)}"
            return question_message(view, link=link, votes=votes), ""
        if status == "resolved" and decision is not None:
            return question_message(view, link=link, outcome=decision_text(decision)), "decided"
        at = question.record.resolved_at
        suffix = f" at {when(at)}" if at is not None else ""
        if status == "expired":
            outcome = f"Expired without a decision{suffix}"
        elif status == "cancelled":
            outcome = f"Withdrawn{suffix}: the run no longer asks"
        else:
            outcome = f"Decided{suffix}"
        return question_message(view, link=link, outcome=outcome), str(status)

    # --- interactions -----------------------------------------------------------------------

    async def _interactions(self, request: Request) -> Response:
        body = await request.body()
        timestamp = request.headers.get("x-slack-request-timestamp", "")
        signature = request.headers.get("x-slack-signature", "")
        # Nothing of the body is read before its signature and timestamp are checked.
        if not timestamp.isdigit() or not self._verifier.is_valid(
            body=body, timestamp=timestamp, signature=signature
        ):
            return JSONResponse(
                {
                    "error": "bad_signature",
                    "message": "the request is not signed by Slack with this app's signing "
                    "secret, or is older than 5 minutes",
                },
                status_code=401,
            )
        if self._state is None or self._client is None or self._group is None:
            return JSONResponse(
                {"error": "not_ready", "message": "the Slack channel is not running yet"},
                status_code=503,
                headers={"Retry-After": "1"},
            )
        try:
            fields = parse_qs(body.decode("utf-8"), strict_parsing=True)
            payload = json.loads(fields["payload"][0])
            kind = payload["type"]
            user = str(payload["user"]["id"])
        except (UnicodeDecodeError, ValueError, KeyError, IndexError, TypeError):
            return JSONResponse(
                {"error": "bad_payload", "message": "expected a form with a JSON payload"},
                status_code=400,
            )
        if kind == "block_actions":
            return await self._action(payload, user)
        if kind == "view_submission":
            return await self._submission(payload, user)
        # Closing a modal and the like: nothing to do.
        return Response(status_code=200)

    async def _action(self, payload: dict[str, Any], user: str) -> Response:
        assert self._group is not None and self._client is not None
        try:
            action = payload["actions"][0]
            action_id = str(action["action_id"])
            value = json.loads(action.get("value") or "{}")
            interrupt_id = str(value["i"])
            shown = str(value["h"])
            channel = str(
                payload.get("channel", {}).get("id") or payload["container"]["channel_id"]
            )
            key = f"{action_id}\0{action.get('action_ts', '')}\0{payload.get('trigger_id', '')}"
        except (KeyError, IndexError, TypeError, ValueError):
            return Response(status_code=200)  # a button of another kind (Open: a link)
        if action_id == APPROVE:
            # ``True`` approves any question: a tool call's and a plain ``approve()``'s.
            press = _Press(
                user=user,
                channel=channel,
                interrupt_id=interrupt_id,
                shown=shown,
                answer=True,
                key=key,
                confirmed=bool(value.get("c")),
            )
            self._group.start_soon(self._decide_logged, press)
            return Response(status_code=200)
        if action_id not in (REJECT, EDIT, RESPOND):
            return Response(status_code=200)
        # A modal: the trigger id lasts 3 seconds, so it opens now, after the person is known.
        try:
            await self._principal(user)
            question = await self._question(interrupt_id)
            if question is None:
                raise _Refusal(f"interrupt {interrupt_id} no longer exists; nothing to decide")
            served, found = question
            if found.record.status != "pending":
                await self._refresh_logged(interrupt_id)
                outcome = self._message(served, found)[0]["text"].partition(" — ")[2]
                raise _Refusal(f"Nothing to decide any more: {outcome or found.record.status}.")
            view = served.view(found.interrupt, found.record.tool)
            tool = 1 if is_tool_question(view) else 0
            meta = json.dumps({"i": interrupt_id, "h": shown, "c": channel, "t": tool})
            modal = {REJECT: reject_modal, EDIT: edit_modal, RESPOND: respond_modal}[action_id]
            await self._client.views_open(trigger_id=payload["trigger_id"], view=modal(view, meta))
        except _Refusal as refusal:
            self._group.start_soon(self._tell, channel, user, str(refusal))
        except SlackApiError as exc:
            _logger.warning("opening a Slack modal failed: %s", exc)
        return Response(status_code=200)

    async def _submission(self, payload: dict[str, Any], user: str) -> Response:
        assert self._group is not None
        try:
            view = payload["view"]
            callback = str(view["callback_id"])
            meta = json.loads(view["private_metadata"])
            interrupt_id, shown, channel = str(meta["i"]), str(meta["h"]), str(meta["c"])
            tool_call = bool(meta.get("t"))
            values = view["state"]["values"]
            key = f"{callback}\0{view['id']}"
        except (KeyError, TypeError, ValueError):
            return Response(status_code=200)
        reason: str | None = None
        confirmed = False
        answer: Any
        if callback == REJECT:
            reason = reason_of(values)
            # A tool call's model is told the reason; a plain question's answer is False.
            answer = {"action": "reject", "message": reason or _REJECTED} if tool_call else False
        elif callback == RESPOND:
            content = response_of(values)
            if content is None:
                return _errors({"answer": "write the answer the agent should get"})
            answer = {"action": "respond", "content": content}
        elif callback == EDIT:
            question = await self._question(interrupt_id)
            if question is None:
                return _errors({"decide": "the question no longer exists"})
            served, found = question
            asked = served.view(found.interrupt, found.record.tool)
            arguments, errors = edited_arguments(asked, values)
            if arguments is None:
                # Refused before anything is recorded: Slack shows each error under its field.
                return _errors(errors or {"decide": "this question takes no edit"})
            answer = {"action": "edit", "arguments": arguments}
            confirmed = edit_confirmed(values)
            if asked.confirm and not confirmed:
                return _errors({CONFIRM_BLOCK: "tick the box: the call runs once you approve"})
        else:
            return Response(status_code=200)
        press = _Press(
            user=user,
            channel=channel,
            interrupt_id=interrupt_id,
            shown=shown,
            answer=answer,
            key=key,
            reason=reason,
            confirmed=confirmed,
        )
        self._group.start_soon(self._decide_logged, press)
        return Response(status_code=200)

    async def _decide_logged(self, press: _Press) -> None:
        try:
            await self._decide(press)
        except _Refusal as refusal:
            await self._tell(press.channel, press.user, str(refusal))
        except Exception:
            _logger.exception("a Slack decision on interrupt %s failed", press.interrupt_id)
            await self._tell(
                press.channel,
                press.user,
                "The server failed to record your decision; its log has the details.",
            )

    async def _decide(self, press: _Press) -> None:
        assert self._state is not None
        interrupt_id = press.interrupt_id
        principal = await self._principal(press.user)
        identity = identity_of(principal)
        nonce = _nonce(press.user, press.key, interrupt_id, press.answer)
        try:
            decided = await decide_as(
                self._state,
                identity,
                interrupt_id,
                press.answer,
                nonce=nonce,
                payload_hash=press.shown,
                reason=press.reason,
                confirmed=press.confirmed,
            )
        except ApiError as refusal:
            if refusal.body.error in ("already_decided", "not_pending"):
                await self._refresh_logged(interrupt_id)
            if refusal.body.error == "question_changed":
                await self._refresh_logged(interrupt_id)
                raise _Refusal(
                    "Nothing was recorded: the question changed since this message was posted; "
                    "the message now shows it as it is — decide on what it says now."
                ) from refusal
            raise _Refusal(f"Nothing was recorded: {refusal.body.message}") from refusal
        if not decided.replayed:
            await self._refresh_logged(interrupt_id)

    async def _refresh_logged(self, interrupt_id: str) -> None:
        """Update a question's message now (the change feed's event will too)."""
        assert self._state is not None
        for served in self._state.served.values():
            stored = await served.store.get_channel_message(self.name, interrupt_id)
            if stored is not None and stored.ref:
                try:
                    await self._refresh(interrupt_id, stored.ref)
                except (SlackApiError, aiohttp.ClientError, TimeoutError, OSError) as exc:
                    _logger.warning(
                        "updating the Slack message of %s failed: %s", interrupt_id, exc
                    )
                return

    async def _principal(self, user: str) -> PrincipalRecord:
        """The principal a Slack user decides as: mapped, else by verified e-mail address."""
        assert self._state is not None and self._client is not None
        store = principal_directory(self._state)
        found = await store.principal_by_contact(slack_user=user)
        if found is None:
            email = await self._verified_email(user)
            if email is not None:
                found = await store.principal_by_contact(email=email)
        if found is None:
            raise _Refusal(
                f"Nothing was recorded: your Slack account ({user}) is not mapped to an "
                "interlock principal. Ask an admin to map it: "
                f"`interlock principal update NAME --slack-user {user}`."
            )
        if found.disabled:
            raise _Refusal(
                f"Nothing was recorded: the principal {found.name} your Slack account is mapped "
                "to is disabled; ask an admin to enable it."
            )
        return found

    async def _verified_email(self, user: str) -> str | None:
        assert self._client is not None
        try:
            got = await self._client.users_info(user=user)
        except SlackApiError as exc:
            _logger.info("users.info of %s failed: %s", user, exc)
            return None
        member = got.get("user") or {}
        profile = member.get("profile") or {}
        email = profile.get("email")
        if member.get("is_bot") or member.get("deleted") or not member.get("is_email_confirmed"):
            return None
        return email if isinstance(email, str) and "@" in email else None

    async def _tell(self, channel: str, user: str, text: str) -> None:
        """An ephemeral message: only ``user`` sees it, in ``channel``."""
        assert self._client is not None
        try:
            await self._client.chat_postEphemeral(channel=channel, user=user, text=text)
        except (SlackApiError, aiohttp.ClientError, TimeoutError, OSError) as exc:
            _logger.warning("telling %s in Slack failed (%s): %s", user, exc, text)


@dataclass(frozen=True, kw_only=True)
class _Press:
    """One person's answer in Slack, as the interaction carried it."""

    user: str
    """The Slack user id."""
    channel: str
    """Where the message is (refusals are told there, to the user alone)."""
    interrupt_id: str
    shown: str
    """The payload hash of the question as the message showed it."""
    answer: Any
    key: str
    """What identifies the interaction (a retried delivery has the same)."""
    reason: str | None = None
    confirmed: bool = False


def _nonce(user: str, key: str, interrupt_id: str, answer: Any) -> str:
    """The decision's idempotency key: one interaction (Slack may send it twice) is one key."""
    who = hashlib.sha256(f"slack\0{user}\0{key}\0{interrupt_id}".encode()).hexdigest()
    what = hashlib.sha256(msgspec.json.encode(answer, order="deterministic")).hexdigest()
    return f"{who[:24]}.{what[:16]}"


def _errors(errors: Mapping[str, str]) -> Response:
    return JSONResponse({"response_action": "errors", "errors": dict(errors)})


def _receipt(exc: SlackApiError) -> Receipt:
    """What a Web API refusal comes to: worth another attempt, or failed for good."""
    response = exc.response
    status = getattr(response, "status_code", None)
    data = getattr(response, "data", None)
    error = data.get("error") if isinstance(data, dict) else None
    headers = getattr(response, "headers", None) or {}
    retry_after: float | None = None
    for name, value in dict(headers).items():
        if str(name).lower() == "retry-after":
            try:
                retry_after = max(float(value), 0.0)
            except (TypeError, ValueError):
                retry_after = None
    detail = f"Slack answered HTTP {status}" + (f": {error}" if error else "")
    if status == 429 or (isinstance(status, int) and status >= 500) or error in _RETRIED_ERRORS:
        return Receipt(outcome="retry", status=status, detail=detail, retry_after=retry_after)
    if error in ("invalid_auth", "not_authed", "token_revoked", "account_inactive"):
        detail += " (check the bot token)"
    elif error in ("channel_not_found", "not_in_channel"):
        detail += " (check the channel id, and invite the app to the channel)"
    return Receipt(outcome="failed", status=status, detail=detail)
