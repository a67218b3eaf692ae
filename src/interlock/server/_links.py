"""One-tap approval links in e-mail: signed, single use, expiring, bound to a person and a question.

An `Email` channel given ``links=EmailLinks(secret=...)`` sends the notice of a new question to
each recipient in a message of their own, with a link to approve it and one to reject it. A
link is a token signed with the server's secret (HMAC-SHA256) that names:

- the question (its interrupt id) and its payload hash as the mail showed it: a question
  changed since is *stale*, and its links do nothing;
- the principal the recipient's address belongs to (``principal_by_contact(email=...)``):
  the decision is recorded as theirs, and a link is only minted for a principal the
  question's authority lets decide;
- what it does (approve or reject), and when it stops working: ``ttl`` after the question
  was asked, and never after the question's deadline.

Single use comes from the decision's idempotency key: a link decides with a nonce derived
from its id, so the decision it made is found recorded with that nonce (the link is *used*),
and the same link sent again is a replay of that decision, never a second one.

Invariant: nothing here writes but `decide_as` (in ``_link_routes``), and only on a POST that
passed the CSRF, origin and (when configured) sign-in checks. Opening a link changes nothing.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

import msgspec

from .._principals import principal_key
from ..runtime import Authority, Principal
from ..stores import PrincipalRecord
from ._deciding import find_question, principal_directory
from ._errors import ApiError
from ._events import ServerEvent
from ._state import ServerState

__all__ = [
    "LINK_PREFIX",
    "Action",
    "EmailLinks",
    "LinkClaims",
    "LinkError",
    "Linker",
    "PersonalLinks",
    "link_nonce",
]

log = logging.getLogger("interlock.notify")

Action = Literal["approve", "reject"]
"""What a link does to its question."""

LINK_PREFIX: Final = "links"
"""The path segment the links live under (``/links/<token>``); the access log masks what
follows it."""

_MIN_SECRET: Final = 32
_VERSION: Final = 1
_KINDS: Final = frozenset({"approval", "tool_approval"})
"""The questions a link can answer: yes or no (``approve()``) and a tool call."""


class EmailLinks:
    """Approve and reject links in the mail of a new question (``Email(..., links=...)``).

    Args:
        secret: The key links are signed with (32 bytes or more; ``openssl rand -hex 32``).
            Anyone who holds it can make links: keep it as you keep a token.
        ttl: Seconds a link works after the question was asked (never past its deadline).
        require_sign_in: Confirming also needs the browser to be signed in (single sign-on
            or a trusted proxy) as the link's principal: a forwarded mail is then useless.
    """

    def __init__(
        self, *, secret: str | bytes, ttl: float = 24 * 3600.0, require_sign_in: bool = False
    ) -> None:
        key = secret.encode() if isinstance(secret, str) else secret
        if not isinstance(key, bytes) or len(key) < _MIN_SECRET:
            raise ValueError(
                f"the links' secret must be {_MIN_SECRET} bytes or more (e.g. the output of "
                "`openssl rand -hex 32`): anyone who guesses it can approve by e-mail"
            )
        if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0:
            raise ValueError(f"ttl must be a positive number of seconds, not {ttl!r}")
        if not isinstance(require_sign_in, bool):
            raise TypeError(f"require_sign_in must be True or False, not {require_sign_in!r}")
        self.ttl = float(ttl)
        self.require_sign_in = require_sign_in
        self._key = hmac.new(key, b"interlock email links v1", hashlib.sha256).digest()

    def __repr__(self) -> str:
        signed = ", sign-in required" if self.require_sign_in else ""
        return f"<EmailLinks ttl={self.ttl:g}s{signed}>"

    @classmethod
    def from_config(cls, table: Mapping[str, Any]) -> EmailLinks:
        """The links a ``[links]`` table of a configuration file describes.

        Keys: ``secret`` (required), ``ttl`` (seconds) and ``require_sign_in``. Unknown keys
        are refused, so that a misspelt one is not silently ignored.
        """
        known = {"secret", "ttl", "require_sign_in"}
        unknown = sorted(set(table) - known)
        if unknown:
            raise ValueError(f"[links] has unknown keys {unknown}; use {sorted(known)}")
        if "secret" not in table:
            raise ValueError("[links] needs secret = '...' (32 bytes or more)")
        return cls(
            secret=table["secret"],
            ttl=table.get("ttl", 24 * 3600.0),
            require_sign_in=table.get("require_sign_in", False),
        )

    # -- tokens ----------------------------------------------------------------------------------

    def mint(self, claims: LinkClaims) -> str:
        """The token of a link (URL-safe: ``<claims>.<signature>``)."""
        body = _b64(msgspec.json.encode(claims))
        return f"{body}.{_b64(self._sign(body))}"

    def read(self, token: str) -> LinkClaims:
        """The claims of a token this server signed (whether expired or not).

        Raises:
            LinkError: The token was not signed with this secret, or was changed.
        """
        body, dot, signature = token.partition(".")
        if not dot or len(token) > 2000:
            raise LinkError("malformed")
        try:
            sent = _unb64(signature)
        except (binascii.Error, ValueError) as exc:
            raise LinkError("malformed") from exc
        if not hmac.compare_digest(sent, self._sign(body)):
            raise LinkError("forged")
        try:
            claims = msgspec.json.decode(_unb64(body), type=LinkClaims)
        except (binascii.Error, ValueError, msgspec.DecodeError) as exc:
            raise LinkError("malformed") from exc
        if claims.v != _VERSION:
            raise LinkError("malformed")
        return claims

    def link_id(self, event_id: str, interrupt_id: str, principal: str, action: Action) -> str:
        """The id of one person's link; the same event always gives the same id (a retried
        mail carries the same links)."""
        text = f"{event_id}\0{interrupt_id}\0{principal_key(principal)}\0{action}"
        return _b64(self._sign(text)[:16])

    def csrf(self, browser: str, link_id: str) -> str:
        """The form token of a link's confirmation page in the browser holding ``browser``."""
        return _b64(self._sign(f"csrf\0{browser}\0{link_id}"))

    def _sign(self, text: str) -> bytes:
        return hmac.new(self._key, text.encode("utf-8", "surrogatepass"), hashlib.sha256).digest()


class LinkClaims(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a link's token says (signed; never secret: anyone holding the mail can read it)."""

    v: int = _VERSION
    """The token format."""
    id: str
    """The link's id (its decision's nonce is derived from it)."""
    interrupt: str
    """The question."""
    principal: str
    """Whose link it is: the decision is recorded as this principal's."""
    action: Action
    """Approve or reject."""
    payload_hash: str
    """The question's hash as the mail showed it."""
    expires: float
    """Unix time after which the link does nothing."""


class LinkError(Exception):
    """Raised when a link's token is not one this server signed (``forged``) or unreadable."""

    def __init__(self, why: Literal["malformed", "forged"]) -> None:
        super().__init__(f"the link is {why}")
        self.why = why


def link_nonce(claims: LinkClaims) -> str:
    """The idempotency key a link decides with: ``<link>.<action>`` (see `decide_as`)."""
    who = hashlib.sha256(f"link\0{claims.id}".encode()).hexdigest()[:24]
    return f"{who}.{claims.action}"


def answer_of(info: Any, action: Action, reason: str | None) -> Any:
    """The answer a link gives a question: the inbox's for the same button."""
    tool = isinstance(info, dict) and info.get("type") == "tool_approval"
    if action == "approve":
        return {"action": "approve"} if tool else True
    if tool:
        return {"action": "reject", "message": reason} if reason else {"action": "reject"}
    return False


def kind_of(info: Any) -> str | None:
    """The question's kind as links know it (``approval``, ``tool_approval``), or None."""
    kind = info.get("type") if isinstance(info, dict) else None
    return kind if kind in _KINDS else None


def may_decide(authority: Authority | None, principal: PrincipalRecord, starter: Any) -> bool:
    """Whether ``principal`` may decide a question with ``authority`` (as far as the mail
    can tell: the runtime checks again, with every rule, when the link is used)."""
    if principal.disabled or principal.role not in ("approver", "admin"):
        return False
    if authority is None:
        return True
    who = Principal(name=principal.name, groups=principal.groups, roles=(principal.role,))
    if authority.names_someone:
        named = any(principal_key(n) == who.key for n in authority.principals)
        if not (
            named
            or any(who.in_group(g) for g in authority.groups)
            or any(who.has_role(r) for r in authority.roles)
        ):
            return False
    return not (
        authority.not_starter and isinstance(starter, str) and principal_key(starter) == who.key
    )


@dataclass(frozen=True, kw_only=True)
class PersonalLinks:
    """One recipient's message: their address, and the links (if any) it carries."""

    address: str
    """The recipient."""
    principal: str | None = None
    """The principal the address belongs to (None: nobody the server knows)."""
    approve: str | None = None
    """The approve link's URL."""
    reject: str | None = None
    """The reject link's URL."""
    expires: float | None = None
    """When the links stop working."""


class Linker:
    """`EmailLinks` at work in one server: mints each recipient's links for a new question."""

    def __init__(self, links: EmailLinks, state: ServerState) -> None:
        self.links = links
        self.state = state

    def base_url(self, served_link: str | None) -> str | None:
        """The server's public URL, from an event's inbox link (``.../inbox#...``)."""
        if not served_link:
            return None
        root, found, _ = served_link.partition("/inbox#")
        return root if found else None

    async def personal(
        self, event: ServerEvent, recipients: tuple[str, ...]
    ) -> list[PersonalLinks]:
        """Each recipient's links for the question ``event`` announces (none for those who
        may not decide it, or whose address names no principal; the log says why)."""
        plain = [PersonalLinks(address=a) for a in recipients]
        base = self.base_url(event.url)
        if event.interrupt_id is None:
            return plain
        if base is None:
            log.warning(
                "email links: not added to the mail of interrupt %s: the server's public URL "
                "is not known (create_app(public_url=...) or --public-url)",
                event.interrupt_id,
            )
            return plain
        try:
            served, question = await find_question(self.state, None, event.interrupt_id)
        except ApiError:
            return plain
        if question.record.status != "pending" or kind_of(question.interrupt.info) is None:
            return plain
        view = served.view(question.interrupt, question.tool)
        authority = served.app.who_decides(question.interrupt, four_eyes=served.four_eyes)
        expires = _expiry(event.at, self.links.ttl, question.interrupt.deadline)
        directory = principal_directory(self.state)
        out: list[PersonalLinks] = []
        for address in recipients:
            principal = await directory.principal_by_contact(email=address)
            if principal is None:
                log.info(
                    "email links: %s gets the mail of interrupt %s without links: no principal "
                    "has that address (set the principal's email)",
                    address,
                    event.interrupt_id,
                )
                out.append(PersonalLinks(address=address))
                continue
            if not may_decide(authority, principal, question.meta.get("started_by")):
                log.info(
                    "email links: %s (%s) gets the mail of interrupt %s without links: they "
                    "may not decide it",
                    address,
                    principal.name,
                    event.interrupt_id,
                )
                out.append(PersonalLinks(address=address, principal=principal.name))
                continue
            urls = {}
            for action in ("approve", "reject"):
                claims = LinkClaims(
                    id=self.links.link_id(event.id, question.record.id, principal.name, action),
                    interrupt=question.record.id,
                    principal=principal.name,
                    action=action,
                    payload_hash=view.payload_hash,
                    expires=expires,
                )
                urls[action] = f"{base}/{LINK_PREFIX}/{self.links.mint(claims)}"
            out.append(
                PersonalLinks(
                    address=address,
                    principal=principal.name,
                    approve=urls["approve"],
                    reject=urls["reject"],
                    expires=expires,
                )
            )
        return out


def _expiry(asked_at: float, ttl: float, deadline: float | None) -> float:
    """When a link stops: ``ttl`` after the question, and never past its deadline."""
    end = asked_at + ttl
    return min(end, deadline) if deadline is not None else end


def when_text(at: float) -> str:
    """A time for a person: ``2026-12-03 10:00 UTC``."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(at))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    if not text or not text.isascii():
        raise ValueError("not base64")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
