"""The notification channels: webhooks (signed JSON, a Slack or a Teams message) and email (SMTP).

A channel says which events it wants, how it retries, and how it sends one event; the
`Notifier` (in ``_notify``) queues and retries deliveries for it.
"""

from __future__ import annotations

import hashlib
import logging
import random
import smtplib
import ssl
import time
import unicodedata
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import formatdate, parsedate_to_datetime
from functools import partial
from typing import Literal, Protocol, runtime_checkable
from urllib.parse import urlsplit

import anyio
import anyio.lowlevel
import anyio.to_thread
import msgspec
from starlette.routing import BaseRoute

from ._events import EVENT_TYPES, EventType, ServerEvent
from ._link_routes import link_routes
from ._links import EmailLinks, Linker, PersonalLinks, when_text
from ._state import ServerState

try:
    import httpx2
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("webhook notifications need httpx2: pip install 'interlock[server]'") from exc
from ._signing import legacy_header, signing_key, standard_headers

__all__ = [
    "INTERRUPT_EVENTS",
    "Channel",
    "Email",
    "Outcome",
    "Receipt",
    "RetryPolicy",
    "Sender",
    "Webhook",
]

_logger = logging.getLogger("interlock.notify")


INTERRUPT_EVENTS: tuple[EventType, ...] = (
    "interrupt.created",
    "interrupt.decided",
    "interrupt.expired",
)
"""The events a channel gets unless told otherwise: the ones a person may have to act on."""

Outcome = Literal["delivered", "retrying", "failed", "dropped"]
"""How a delivery attempt ended, as the log records it."""

_HEADLINES: dict[EventType, str] = {
    "interrupt.created": "Decision needed",
    "interrupt.decided": "Decided",
    "interrupt.expired": "Expired without a decision",
    "interrupt.cancelled": "Withdrawn",
    "run.finished": "Run finished",
    "run.failed": "Run failed",
}


# --- the channel protocol --------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Receipt:
    """What one attempt to deliver came to, as a channel reports it."""

    outcome: Literal["delivered", "retry", "failed"]
    """Delivered; failed but worth another attempt; or failed for good."""
    status: int | None = None
    """The receiver's answer: an HTTP status or an SMTP reply code."""
    detail: str = ""
    """What went wrong, for the log (or a note on a delivery)."""
    retry_after: float | None = None
    """How long the receiver asked to wait before the next attempt, in seconds."""


Sender = Callable[[ServerEvent, int], Awaitable[Receipt]]
"""Makes one attempt to deliver an event; takes the event and the attempt's number (from 1)."""


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How often and how patiently a channel retries a delivery that failed for a while."""

    max_attempts: int = 6
    """Attempts in all, the first one included."""
    backoff: float = 1.0
    """The wait before the second attempt, in seconds; it doubles with each attempt."""
    max_backoff: float = 60.0
    """The longest wait between two attempts, a receiver's ``Retry-After`` included."""

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise TypeError(f"max_attempts must be an int, not {self.max_attempts!r}")
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be 1 or more, not {self.max_attempts}")
        if not 0 <= self.backoff <= self.max_backoff:
            raise ValueError(
                f"backoff ({self.backoff}) must be between 0 and max_backoff "
                f"({self.max_backoff}) seconds"
            )

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """The wait after attempt number ``attempt`` failed.

        The receiver's ``retry_after`` wins when given. Otherwise the wait doubles from
        ``backoff`` and is jittered down by up to half, so that deliveries that failed
        together do not all come back at once.
        """
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_backoff)
        base = min(self.backoff * 2.0 ** (attempt - 1), self.max_backoff)
        return base * random.uniform(0.5, 1.0)


@runtime_checkable
class Channel(Protocol):
    """Where notifications go: a `Webhook`, an `Email` list, or a channel of your own."""

    @property
    def name(self) -> str:
        """Names the channel in the log; unique within a `Notifier`."""
        ...

    @property
    def events(self) -> frozenset[EventType]:
        """The event types the channel is sent."""
        ...

    @property
    def retry(self) -> RetryPolicy:
        """How the notifier retries the channel's failed attempts."""
        ...

    def connect(self) -> AbstractAsyncContextManager[Sender]:
        """Open what the channel needs while the notifier runs (a connection pool, say).

        The `Sender` it yields is called concurrently; it must return within the channel's
        own timeout and report failures as a `Receipt` rather than raise.
        """
        ...


def _event_types(events: Iterable[EventType]) -> frozenset[EventType]:
    if isinstance(events, str):
        raise TypeError(f"events must be a list of event types, not the string {events!r}")
    chosen = frozenset(events)
    unknown = sorted(chosen.difference(EVENT_TYPES))
    if unknown:
        raise ValueError(f"unknown event types {unknown}; choose from {list(EVENT_TYPES)}")
    if not chosen:
        raise ValueError(f"events is empty; choose some of {list(EVENT_TYPES)}")
    return chosen


def _positive(name: str, value: float) -> float:
    if not value > 0:
        raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")
    return float(value)


def _one_line(text: str) -> str:
    """``text`` with its control and line-breaking characters written as escapes.

    New thread ids and actor names cannot hold them (`InvalidId`), but a thread stored before
    that rule may: shown escaped, its name cannot break a mail header or a line of the body.
    """
    return "".join(_escaped(ch) if unicodedata.category(ch) in _BREAKING else ch for ch in text)


def _escaped(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_BREAKING = frozenset({"Cc", "Zl", "Zp"})
"""Unicode categories `_one_line` escapes: controls, line and paragraph separators."""


def _headline(event: ServerEvent) -> str:
    label = _HEADLINES[event.type]
    if event.type == "interrupt.decided" and event.actor:
        label = f"Decided by {_one_line(event.actor)}"
    summary = " ".join(event.summary.split())
    return f"{label}: {summary}" if summary else f"{label} on thread {_one_line(event.thread)}"


def _when(event: ServerEvent) -> str:
    return datetime.fromtimestamp(event.at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


# --- webhooks --------------------------------------------------------------------------------

_RESERVED_HEADERS = frozenset({"content-type", "content-length", "host", "user-agent"})
_RETRIED_STATUSES = frozenset({408, 429})
_DETAIL_BYTES = 300


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait, from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return max(when.timestamp() - time.time(), 0.0)
    return seconds if seconds >= 0 and seconds != float("inf") else None


def _mrkdwn(text: str) -> str:
    """Text as Slack's mrkdwn shows it literally (only &, < and > are special there)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_TEAMS_HEADLINE = 1000
"""The longest headline a Teams card shows, in characters; a summary runs that long at most."""
_TEAMS_FACT = 200
"""The longest thread, tool or app name a Teams card shows, in characters."""


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _text_run(text: str, **style: object) -> dict[str, object]:
    # Text from a run goes in TextRuns only: Adaptive Cards render no Markdown in them, so a
    # summary like "[Approve](https://elsewhere)" shows as typed instead of as a link.
    return {"type": "TextRun", "text": text, **style}


def _teams_message(event: ServerEvent) -> dict[str, object]:
    """The Microsoft Teams message for an event: an Adaptive Card 1.4 in a message envelope."""
    headline = _cut(_headline(event), _TEAMS_HEADLINE)
    facts = [("Thread", _one_line(event.thread))]
    if event.tool:
        facts.append(("Tool", _one_line(event.tool)))
    if event.app:
        facts.append(("App", _one_line(event.app)))
    body: list[dict[str, object]] = [
        {
            "type": "RichTextBlock",
            "inlines": [_text_run(headline, weight="bolder", size="medium")],
        }
    ]
    for label, value in facts:
        inlines = [
            _text_run(f"{label}: ", weight="bolder"),
            _text_run(_cut(value, _TEAMS_FACT), fontType="monospace"),
        ]
        body.append({"type": "RichTextBlock", "spacing": "small", "inlines": inlines})
    body.append(
        {
            "type": "RichTextBlock",
            "inlines": [
                _text_run(
                    f"{event.type} · {_when(event)} · event {_cut(event.id, _TEAMS_FACT)}",
                    isSubtle=True,
                    size="small",
                )
            ],
        }
    )
    card: dict[str, object] = {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        # What a client that cannot show the card shows, and the notification's text.
        "fallbackText": headline,
        "body": body,
        "msteams": {"width": "Full"},
    }
    if event.url:
        card["actions"] = [{"type": "Action.OpenUrl", "title": "Open", "url": event.url}]
    return {
        "type": "message",
        "attachments": [
            {
                "contentType": "application/vnd.microsoft.card.adaptive",
                "contentUrl": None,
                "content": card,
            }
        ],
    }


def _slack_message(event: ServerEvent) -> dict[str, object]:
    """The Slack-compatible message for an event: ``{"text": ..., "blocks": [...]}``."""
    headline = _headline(event)
    fields = [{"type": "mrkdwn", "text": f"*Thread*\n`{_mrkdwn(_one_line(event.thread))}`"}]
    if event.tool:
        fields.append({"type": "mrkdwn", "text": f"*Tool*\n`{_mrkdwn(event.tool)}`"})
    if event.app:
        fields.append({"type": "mrkdwn", "text": f"*App*\n{_mrkdwn(event.app)}"})
    blocks: list[dict[str, object]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*{_mrkdwn(headline)[:2900]}*"}},
        {"type": "section", "fields": fields},
    ]
    if event.url:
        blocks.append(
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "button",
                        "text": {"type": "plain_text", "text": "Open"},
                        "url": event.url,
                    }
                ],
            }
        )
    context = f"{event.type} · {_when(event)} · event {event.id}"
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": _mrkdwn(context)}]})
    # The text is what notifications and clients without blocks show.
    text = f"{_mrkdwn(headline)} (thread {_mrkdwn(_one_line(event.thread))})"
    if event.url:
        text += f" <{event.url}|Open>"
    return {"text": text, "blocks": blocks}


_Format = Literal["json", "slack", "teams"]
_FORMATS: tuple[_Format, ...] = ("json", "slack", "teams")


class Webhook:
    """An HTTP endpoint that is POSTed each event, signed with a shared secret.

    The body is the event as JSON (``format="json"``), a message a Slack-compatible
    incoming webhook shows to people (``format="slack"``), or a message with an Adaptive
    Card for a Microsoft Teams incoming webhook or workflow (``format="teams"``). Every
    request is signed per Standard Webhooks (``webhook-id``, ``webhook-timestamp``,
    ``webhook-signature``) and carries ``Interlock-Event-Id``, ``Interlock-Event-Type``,
    ``Interlock-Attempt`` and, until 0.3.0, the deprecated ``Interlock-Signature``; see
    docs/notifications.md.

    The secret is a ``whsec_<base64>`` string (the Standard Webhooks form, whose decoded
    bytes are the key) or any other string or bytes (used as the key as they are).

    Connection errors, timeouts, 408, 429 and 5xx answers are retried with exponential
    backoff (honouring ``Retry-After``); other answers outside 2xx fail at once.
    """

    def __init__(
        self,
        url: str,
        *,
        secret: str | bytes,
        events: Iterable[EventType] = INTERRUPT_EVENTS,
        format: _Format = "json",
        timeout: float = 5.0,
        max_attempts: int = 6,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"a webhook URL must be http:// or https:// with a host, not {url!r}")
        if not isinstance(secret, str | bytes):
            raise TypeError(f"secret must be a string or bytes, not {type(secret).__name__}")
        key = signing_key(secret)
        if format not in _FORMATS:
            raise ValueError(f"format must be 'json', 'slack' or 'teams', not {format!r}")
        extra = dict(headers or {})
        clashes = sorted(
            k
            for k in extra
            if k.lower() in _RESERVED_HEADERS or k.lower().startswith(("interlock-", "webhook-"))
        )
        if clashes:
            raise ValueError(
                f"headers {clashes} are set by the webhook itself; leave them out of headers="
            )
        self.url = url
        self.format: _Format = format
        self.timeout = _positive("timeout", timeout)
        self.headers: Mapping[str, str] = extra
        self.events = _event_types(events)
        self.retry = RetryPolicy(
            max_attempts=max_attempts, backoff=backoff, max_backoff=max_backoff
        )
        # The path of a webhook URL is often a credential (Slack's are): the default name,
        # which goes to logs, shows the host only.
        self.name = name or f"webhook {parts.hostname}"
        self._secret = secret
        self._key = key

    def __repr__(self) -> str:
        return f"<Webhook {self.name!r} {self.format} events={sorted(self.events)}>"

    def body(self, event: ServerEvent) -> bytes:
        """The bytes POSTed for ``event`` (the same on every attempt)."""
        if self.format == "slack":
            return msgspec.json.encode(_slack_message(event))
        if self.format == "teams":
            return msgspec.json.encode(_teams_message(event))
        return msgspec.json.encode(event)

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[Sender]:
        """Open the connection pool the webhook's requests share."""
        # Building a client loads the system's CA certificates: off the event loop.
        client = await anyio.to_thread.run_sync(
            partial(httpx2.AsyncClient, timeout=self.timeout, follow_redirects=False)
        )
        async with client:
            yield partial(self._post, client)

    async def _post(self, client: httpx2.AsyncClient, event: ServerEvent, attempt: int) -> Receipt:
        body = self.body(event)
        # Each attempt is signed anew (a fresh timestamp), over the same id and body: a retry
        # minutes later is not refused as a replay, and is still recognised as a duplicate.
        now = int(time.time())
        headers = {
            **self.headers,
            "Content-Type": "application/json",
            "User-Agent": "interlock",
            **standard_headers(self._key, event.id, body, timestamp=now),
            "Interlock-Event-Id": event.id,
            "Interlock-Event-Type": event.type,
            "Interlock-Attempt": str(attempt),
            # Deprecated, sent until 0.3.0 so receivers can move to webhook-signature.
            "Interlock-Signature": legacy_header(self._secret, body, timestamp=now),
        }
        # httpx's timeout bounds each phase; this bounds the whole attempt, so a receiver
        # that trickles its answer cannot hold it longer.
        with anyio.move_on_after(self.timeout) as deadline:
            try:
                async with client.stream("POST", self.url, content=body, headers=headers) as got:
                    status = got.status_code
                    snippet = b""
                    if not 200 <= status < 300:
                        async for chunk in got.aiter_bytes():
                            snippet += chunk
                            if len(snippet) >= _DETAIL_BYTES:
                                break
                    retry_after = got.headers.get("retry-after")
            except httpx2.TimeoutException:
                return Receipt(outcome="retry", detail=f"no answer within {self.timeout:g} s")
            except httpx2.TransportError as exc:
                return Receipt(outcome="retry", detail=f"{type(exc).__name__}: {exc}")
        if deadline.cancelled_caught:
            return Receipt(outcome="retry", detail=f"no answer within {self.timeout:g} s")
        if 200 <= status < 300:
            return Receipt(outcome="delivered", status=status)
        text = snippet[:_DETAIL_BYTES].decode("utf-8", "replace").strip()
        detail = f"HTTP {status}" + (f": {text}" if text else "")
        if status in _RETRIED_STATUSES or status >= 500:
            return Receipt(
                outcome="retry", status=status, detail=detail, retry_after=_retry_after(retry_after)
            )
        if 300 <= status < 400:
            detail += " (redirects are not followed: configure the webhook with the final URL)"
        return Receipt(outcome="failed", status=status, detail=detail)


# --- email -----------------------------------------------------------------------------------


def _address(role: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip() or any(c in value for c in "\r\n"):
        raise ValueError(f"{role} must be an email address, not {value!r}")
    return value.strip()


class Email:
    """A list of people who are sent each event by email, through an SMTP server.

    The message is plain text: what happened, the thread, the tool, and a link to the
    inbox when the server knows its URL. Refusals with a 4xx reply code, lost connections
    and timeouts are retried with exponential backoff; 5xx refusals fail at once.

    With ``links`` (`EmailLinks`), the mail of a new question goes to each recipient alone,
    with their own links to approve or reject it (see docs/how-to/email-links.md).
    """

    def __init__(
        self,
        host: str,
        port: int = 25,
        *,
        sender: str,
        recipients: Iterable[str],
        username: str | None = None,
        password: str | None = None,
        starttls: bool = False,
        use_tls: bool = False,
        ssl_context: ssl.SSLContext | None = None,
        events: Iterable[EventType] = INTERRUPT_EVENTS,
        subject_prefix: str = "[interlock]",
        timeout: float = 30.0,
        max_attempts: int = 6,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        name: str | None = None,
        links: EmailLinks | None = None,
    ) -> None:
        if not host:
            raise ValueError("host must name the SMTP server, e.g. 'smtp.example.com'")
        if isinstance(recipients, str):
            raise TypeError(
                f"recipients must be a list of addresses, not the string {recipients!r}; "
                f"write recipients=[{recipients!r}]"
            )
        if starttls and use_tls:
            raise ValueError(
                "starttls and use_tls exclude each other: use_tls=True for a server that "
                "speaks TLS from the start (port 465), starttls=True to upgrade (port 587)"
            )
        if (username is None) != (password is None):
            raise ValueError("give both username and password to log in, or neither")
        self.host = host
        self.port = int(port)
        self.sender = _address("sender", sender)
        self.recipients = tuple(_address("a recipient", r) for r in recipients)
        if not self.recipients:
            raise ValueError("recipients is empty; name at least one address")
        self.username = username
        self.starttls = starttls
        self.use_tls = use_tls
        self.subject_prefix = subject_prefix
        self.timeout = _positive("timeout", timeout)
        self.events = _event_types(events)
        self.retry = RetryPolicy(
            max_attempts=max_attempts, backoff=backoff, max_backoff=max_backoff
        )
        self.name = name or f"email {host}:{self.port}"
        if links is not None and not isinstance(links, EmailLinks):
            raise TypeError(f"links must be an EmailLinks, not {links!r}")
        self.links = links
        self._password = password
        self._ssl_context = ssl_context
        self._linker: Linker | None = None
        # Who got each recent event's mail: a retry after a partial failure sends only
        # to the others.
        self._sent: OrderedDict[str, set[str]] = OrderedDict()

    def __repr__(self) -> str:
        return f"<Email {self.name!r} to {len(self.recipients)} events={sorted(self.events)}>"

    def attach(self, state: ServerState) -> Sequence[BaseRoute]:
        """Mount the links' pages in the server that runs this channel (with ``links``)."""
        if self.links is None:
            return []
        self._linker = Linker(self.links, state)
        return link_routes(self.links, state)

    def message(self, event: ServerEvent, personal: PersonalLinks | None = None) -> EmailMessage:
        """The email sent for ``event`` (to one recipient, with their links, if given)."""
        headline = _headline(event)
        subject = f"{self.subject_prefix} {headline}".strip()
        if len(subject) > 150:
            subject = subject[:149] + "…"
        rows = [("Thread", _one_line(event.thread))]
        if event.app:
            rows.append(("App", event.app))
        if event.tool:
            rows.append(("Tool", event.tool))
        if event.interrupt_id:
            rows.append(("Interrupt", event.interrupt_id))
        if event.actor:
            rows.append(("Decided by", _one_line(event.actor)))
        if event.url:
            rows.append(("Open", event.url))
        width = max(len(k) for k, _ in rows) + 1
        lines = [headline, "", *(f"{k + ':':<{width}} {v}" for k, v in rows), ""]
        if personal is not None and personal.approve and personal.reject:
            assert personal.expires is not None
            lines += [
                f"Approve: {personal.approve}",
                "",
                f"Reject:  {personal.reject}",
                "",
                f"These links are for {personal.principal} alone, work once, and expire at "
                f"{when_text(personal.expires)}. Each opens a page to confirm on.",
                "",
            ]
        lines.append(f"{event.type} at {_when(event)} (event {event.id})")
        message = EmailMessage()
        message["Subject"] = subject
        message["From"] = self.sender
        message["To"] = personal.address if personal else ", ".join(self.recipients)
        message["Date"] = formatdate(usegmt=True)
        # The same event always gets the same Message-ID: mail systems that deduplicate
        # on it drop a retry that follows a delivery whose answer was lost.
        domain = self.sender.rpartition("@")[2] or "interlock.invalid"
        seed = f"{event.id}\0{event.type}" + (f"\0{personal.address}" if personal else "")
        digest = hashlib.sha256(seed.encode()).hexdigest()[:32]
        message["Message-ID"] = f"<interlock.{digest}@{domain}>"
        message["Interlock-Event-Id"] = " ".join(event.id.split())
        message["Interlock-Event-Type"] = event.type
        message.set_content("\n".join(lines) + "\n")
        return message

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[Sender]:
        """Nothing stays open between deliveries: each one is an SMTP session of its own."""
        yield self._send

    async def _send(self, event: ServerEvent, attempt: int) -> Receipt:
        if self._linker is not None and event.type == "interrupt.created":
            return await self._send_personal(event)
        message = self.message(event)
        # smtplib blocks; its socket timeout bounds the thread. Abandoned on cancellation,
        # the thread ends by that timeout.
        return await anyio.to_thread.run_sync(self._send_blocking, message, abandon_on_cancel=True)

    async def _send_personal(self, event: ServerEvent) -> Receipt:
        """One message per recipient, each with their own links; a retry skips those who
        got theirs."""
        assert self._linker is not None
        sent = self._sent.setdefault(event.id, set())
        self._sent.move_to_end(event.id)
        while len(self._sent) > 1000:
            self._sent.popitem(last=False)
        left = tuple(r for r in self.recipients if r not in sent)
        receipt = Receipt(outcome="delivered", status=250)
        for personal in await self._linker.personal(event, left):
            message = self.message(event, personal)
            receipt = await anyio.to_thread.run_sync(
                partial(self._send_blocking, message, [personal.address]), abandon_on_cancel=True
            )
            if receipt.outcome != "delivered":
                return receipt
            sent.add(personal.address)
        return receipt

    def _send_blocking(self, message: EmailMessage, to: list[str] | None = None) -> Receipt:
        context = self._ssl_context or (
            ssl.create_default_context() if self.starttls or self.use_tls else None
        )
        try:
            smtp: smtplib.SMTP
            if self.use_tls:
                smtp = smtplib.SMTP_SSL(self.host, self.port, timeout=self.timeout, context=context)
            else:
                smtp = smtplib.SMTP(self.host, self.port, timeout=self.timeout)
            with smtp:
                if self.starttls:
                    smtp.starttls(context=context)
                if self.username is not None and self._password is not None:
                    smtp.login(self.username, self._password)
                refused = smtp.send_message(
                    message, from_addr=self.sender, to_addrs=to or list(self.recipients)
                )
        except smtplib.SMTPRecipientsRefused as exc:
            codes = [code for code, _ in exc.recipients.values()]
            detail = "; ".join(
                f"{who}: {code} {_text(reply)}" for who, (code, reply) in exc.recipients.items()
            )
            transient = all(400 <= code < 500 for code in codes)
            return Receipt(
                outcome="retry" if transient else "failed", status=max(codes), detail=detail
            )
        except smtplib.SMTPResponseException as exc:
            detail = f"SMTP {exc.smtp_code} {_text(exc.smtp_error)}"
            transient = 400 <= exc.smtp_code < 500
            return Receipt(
                outcome="retry" if transient else "failed", status=exc.smtp_code, detail=detail
            )
        except (smtplib.SMTPNotSupportedError, ssl.SSLCertVerificationError) as exc:
            return Receipt(outcome="failed", detail=f"{type(exc).__name__}: {exc}")
        except (smtplib.SMTPException, OSError) as exc:
            return Receipt(outcome="retry", detail=f"{type(exc).__name__}: {exc}")
        if refused:
            return Receipt(
                outcome="delivered",
                status=250,
                detail="refused by the server: " + ", ".join(sorted(refused)),
            )
        return Receipt(outcome="delivered", status=250)


def _text(reply: bytes | str) -> str:
    return reply.decode("utf-8", "replace") if isinstance(reply, bytes) else str(reply)
