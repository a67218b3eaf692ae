"""The pages behind e-mail links: ``GET /links/{token}`` shows, ``POST /links/{token}`` decides.

Opening a link (GET) changes nothing: mail scanners and link previews open links. It shows the
question and one button; the POST that button sends is the decision. The POST must carry the
form's CSRF token, which is bound to the link and to a cookie the page set (HttpOnly,
SameSite=Strict), and come from this server's own page (its ``Origin``, else ``Referer``).
With ``require_sign_in`` the browser must also be signed in as the link's principal.

Every other outcome is a page that says what happened and links to the inbox: a used link
(when, by whom), a question decided by someone else, an expired, changed (stale) or tampered
link, a person signed in as someone else.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import json
import logging
import re
import time
from collections.abc import Sequence
from typing import Any, Final
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from .._principals import principal_key
from ..runtime import Question
from ._deciding import decide_as, find_question, identity_of, principal_directory
from ._errors import ApiError
from ._links import (
    LINK_PREFIX,
    EmailLinks,
    LinkClaims,
    LinkError,
    answer_of,
    link_nonce,
    when_text,
)
from ._served import Served
from ._sessions import new_secret
from ._signin import caller
from ._state import ServerState

__all__ = ["link_routes"]

log = logging.getLogger("interlock.server")

COOKIE: Final = "interlock_link"
_SECRET: Final = re.compile(r"^[A-Za-z0-9_-]{43}$")
_MAX_REASON: Final = 2000

_STYLE: Final = (
    "body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1b1f24}"
    "main{max-width:36rem;margin:0 auto;padding:1rem}"
    "h1{font-size:1.35rem;margin:.5rem 0 1rem}"
    ".card{background:#fff;border:1px solid #d8dde3;border-radius:.6rem;padding:1rem;"
    "margin-bottom:1rem;overflow-wrap:anywhere}"
    "dl{margin:0}dt{font-weight:600;font-size:.85rem;color:#57606a;margin-top:.6rem}"
    "dd{margin:0}pre{white-space:pre-wrap;font-size:.9rem;margin:0}"
    "label{display:block;font-weight:600;margin:.5rem 0 .25rem}"
    "textarea{width:100%;box-sizing:border-box;min-height:5rem;font:inherit;padding:.5rem}"
    ".check{display:flex;gap:.6rem;align-items:flex-start;font-weight:400}"
    ".check input{width:1.5rem;height:1.5rem;flex:none}"
    "button{width:100%;min-height:3rem;font:inherit;font-weight:600;border:0;"
    "border-radius:.5rem;color:#fff;margin-top:.75rem}"
    ".approve{background:#1a7f37}.reject{background:#cf222e}"
    ".note{color:#57606a;font-size:.9rem}a{color:#0969da}"
)
_STYLE_HASH: Final = base64.b64encode(hashlib.sha256(_STYLE.encode()).digest()).decode()
_CSP: Final = (
    f"default-src 'self'; script-src 'none'; style-src 'sha256-{_STYLE_HASH}'; "
    "img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)


def link_routes(links: EmailLinks, state: ServerState) -> Sequence[BaseRoute]:
    """The routes of the links' pages, for ``create_app`` to mount (``Email.attach``)."""
    pages = _Pages(links, state)
    return [
        Route(f"/{LINK_PREFIX}/{{token}}", pages.show, methods=["GET"], name="link_show"),
        Route(f"/{LINK_PREFIX}/{{token}}", pages.decide, methods=["POST"], name="link_decide"),
    ]


class _Pages:
    def __init__(self, links: EmailLinks, state: ServerState) -> None:
        self.links = links
        self.state = state

    async def show(self, request: Request) -> Response:
        """``GET /links/{token}``: the question and one button; records nothing."""
        found = await self._load(request)
        if isinstance(found, Response):
            return found
        claims, served, question = found
        over = self._over(request, claims, served, question)
        if over is not None:
            return over
        browser = request.cookies.get(COOKIE, "")
        if not _SECRET.match(browser):
            browser = new_secret()
        response = self._confirm_page(request, claims, served, question, browser)
        response.set_cookie(
            COOKIE,
            browser,
            path=_root(request) + f"/{LINK_PREFIX}/",
            secure=request.url.scheme == "https",
            httponly=True,
            samesite="strict",
        )
        return response

    async def decide(self, request: Request) -> Response:
        """``POST /links/{token}``: the confirmation; decides through `decide_as`."""
        found = await self._load(request)
        if isinstance(found, Response):
            return found
        claims, _, question = found
        if not _same_origin(request, self.state):
            return _page(
                request,
                403,
                "Confirm from the link's own page",
                "This confirmation did not come from the page the link opened. Open the link "
                "from your mail again and confirm there.",
            )
        form = await request.form()
        sent = form.get("csrf")
        browser = request.cookies.get(COOKIE, "")
        expected = self.links.csrf(browser, claims.id) if _SECRET.match(browser) else None
        if (
            expected is None
            or not isinstance(sent, str)
            or not hmac.compare_digest(sent.encode(), expected.encode())
        ):
            return _page(
                request,
                403,
                "This confirmation cannot be accepted",
                "It came without the form's security token (or with another browser's). "
                "Open the link from your mail again and confirm there. Nothing was recorded.",
            )
        refused = self._signed_in_as(request, claims)
        if refused is not None:
            return refused
        if claims.expires <= time.time():
            return _expired(request, claims)
        principal = await principal_directory(self.state).get_principal(claims.principal)
        if principal is None or principal.disabled:
            return _page(
                request,
                403,
                "This link no longer works",
                f"{claims.principal} may no longer decide through this server. Nothing was "
                "recorded.",
            )
        reason = form.get("reason")
        text = reason.strip()[:_MAX_REASON] if isinstance(reason, str) else ""
        confirmed = form.get("confirmed") == "yes"
        try:
            done = await decide_as(
                self.state,
                identity_of(principal),
                claims.interrupt,
                answer_of(question.interrupt.info, claims.action, text or None),
                nonce=link_nonce(claims),
                payload_hash=claims.payload_hash,
                reason=text or None,
                confirmed=confirmed,
            )
        except ApiError as refusal:
            return self._refused(request, claims, refusal)
        word = "approved" if claims.action == "approve" else "rejected"
        if done.replayed:
            return _used(request, claims, done.decision.actor, done.decision.decided_at)
        log.info(
            "%s %s interrupt %s through an e-mail link", principal.name, word, claims.interrupt
        )
        pending = "" if done.decision.final else " It needs more approvals before it runs."
        return _page(
            request,
            200,
            f"You {word} it",
            f"Your decision on “{_summary(question)}” is recorded.{pending}",
        )

    # -- reading a link --------------------------------------------------------------------------

    async def _load(self, request: Request) -> tuple[LinkClaims, Served, Question] | Response:
        token = request.path_params.get("token", "")
        try:
            claims = self.links.read(token)
        except LinkError:
            return _page(
                request,
                400,
                "This link is not valid",
                "It was changed or cut short on its way (some mail programs break long "
                "links). Decide in the inbox instead.",
            )
        try:
            served, question = await find_question(self.state, None, claims.interrupt)
        except ApiError:
            return _page(
                request, 404, "This question is gone", "The server no longer has this question."
            )
        return claims, served, question

    def _over(
        self, request: Request, claims: LinkClaims, served: Served, question: Question
    ) -> Response | None:
        """The page for a link that can no longer decide, or None."""
        row = question.record
        decided = served.decision(row) if row.status != "pending" else None
        if decided is not None and decided.nonce == link_nonce(claims):
            return _used(request, claims, decided.actor, decided.decided_at)
        if decided is not None:
            return _page(
                request,
                409,
                "Someone else decided",
                f"Decided by {decided.actor or 'someone'} at {when_text(decided.decided_at)}. "
                "Nothing more is needed from you.",
            )
        if row.status != "pending":
            return _page(
                request,
                409,
                "This question is no longer waiting",
                f"It is {row.status}: there is nothing to decide.",
            )
        mine = principal_key(claims.principal)
        if any(principal_key(a) == mine for a in question.interrupt.approved_by):
            return _used(request, claims, claims.principal, None)
        if claims.expires <= time.time():
            return _expired(request, claims)
        if claims.payload_hash != question.payload_hash:
            return _stale(request)
        return None

    def _signed_in_as(self, request: Request, claims: LinkClaims) -> Response | None:
        """With ``require_sign_in``, the refusal of a browser not signed in as the link's
        principal; else None."""
        if not self.links.require_sign_in:
            return None
        try:
            who = caller(request, self.state)
        except ApiError:
            who = None
        if who is not None and who.via != "token":
            if principal_key(who.identity.name) == principal_key(claims.principal):
                return None
            return _page(
                request,
                403,
                "This link is someone else's",
                f"It was sent to {claims.principal}, and this browser is signed in as "
                f"{who.identity.name}. Only {claims.principal} can use it. Nothing was "
                "recorded.",
            )
        return _page(
            request,
            401,
            "Sign in first",
            f"This server asks you to be signed in as {claims.principal} to decide from a "
            "link. Sign in to the inbox, then open the link again. Nothing was recorded.",
        )

    def _refused(self, request: Request, claims: LinkClaims, refusal: ApiError) -> Response:
        code, message = refusal.body.error, refusal.body.message
        if code == "question_changed":
            return _stale(request)
        if code == "already_decided":
            return _page(
                request,
                409,
                "Someone else decided",
                f"This question was {message}. Nothing more is needed from you.",
            )
        if code == "confirmation_required":
            return _page(
                request,
                428,
                "Tick the confirmation first",
                "This action asks for an explicit confirmation. Go back, tick the box, and "
                "confirm again. Nothing was recorded.",
            )
        titles = {
            "not_authorized": "You may not decide this question",
            "four_eyes": "Someone else must decide this",
            "not_pending": "This question is no longer waiting",
            "rate_limited": "Too many decisions at once",
            "thread_busy": "The run is busy",
        }
        title = titles.get(code, "The decision was not recorded")
        return _page(request, refusal.status, title, f"{message[:1].upper()}{message[1:]}.")

    def _confirm_page(
        self,
        request: Request,
        claims: LinkClaims,
        served: Served,
        question: Question,
        browser: str,
    ) -> Response:
        view = served.view(question.interrupt, question.tool)
        info = question.interrupt.info if isinstance(question.interrupt.info, dict) else {}
        approve = claims.action == "approve"
        rows: list[tuple[str, str]] = [("Question", view.summary)]
        agent = info.get("agent") or served.name
        rows.append(("Agent", str(agent)))
        if view.tool:
            rows.append(("Tool", view.tool))
        args = info.get("arguments")
        rule = info.get("rule")
        who = view.authority.text if view.authority is not None else "anyone with the approver role"
        rows_html = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in rows)
        if args is not None:
            shown = _json(args)
            rows_html += f"<dt>Arguments</dt><dd><pre>{html.escape(shown)}</pre></dd>"
        if rule:
            rows_html += f"<dt>Rule</dt><dd>{html.escape(str(rule))}</dd>"
        rows_html += f"<dt>Who may decide</dt><dd>{html.escape(who)}</dd>"
        rows_html += f"<dt>Thread</dt><dd>{html.escape(question.thread)}</dd>"
        rows_html += (
            f"<dt>This link</dt><dd>for {html.escape(claims.principal)}, until "
            f"{html.escape(when_text(claims.expires))}</dd>"
        )
        extra = ""
        if approve and view.confirm:
            extra = (
                '<label class="check"><input type="checkbox" name="confirmed" value="yes" '
                "required> I have checked what will run, and it cannot be undone.</label>"
            )
        if not approve:
            extra = (
                '<label for="reason">Reason (optional)</label>'
                '<textarea id="reason" name="reason" maxlength="2000"></textarea>'
            )
        csrf = self.links.csrf(browser, claims.id)
        title = "Approve this?" if approve else "Reject this?"
        label = "Approve" if approve else "Reject"
        button = (
            '<button class="approve" type="submit">Approve</button>'
            if approve
            else '<button class="reject" type="submit">Reject</button>'
        )
        body = (
            f'<section class="card"><dl>{rows_html}</dl></section>'
            '<form method="post" class="card">'
            f'<input type="hidden" name="csrf" value="{html.escape(csrf)}">'
            f"{extra}{button}</form>"
            f'<p class="note">Nothing is recorded until you press {label}. '
            f'<a href="{_inbox(request)}">Open the inbox</a></p>'
        )
        return _html(200, title, body)


def _used(request: Request, claims: LinkClaims, actor: str | None, at: float | None) -> Response:
    when = f" at {when_text(at)}" if at is not None else ""
    word = "approve" if claims.action == "approve" else "reject"
    return _page(
        request,
        409,
        "This link was already used",
        f"It was used to {word} by {actor or claims.principal}{when}. A link works once.",
    )


def _expired(request: Request, claims: LinkClaims) -> Response:
    return _page(
        request,
        410,
        "This link has expired",
        f"It worked until {when_text(claims.expires)}. Decide in the inbox instead.",
    )


def _stale(request: Request) -> Response:
    return _page(
        request,
        409,
        "The question has changed",
        "It is not the one this mail showed. Read it again in the inbox and decide there. "
        "Nothing was recorded.",
    )


def _summary(question: Question) -> str:
    info = question.interrupt.info
    text = info.get("question") if isinstance(info, dict) else None
    return str(text or question.tool or question.record.id)


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _same_origin(request: Request, state: ServerState) -> bool:
    """Whether a POST comes from this server's own page (``Origin``, else ``Referer``)."""
    sent = request.headers.get("origin")
    if sent is None or sent == "null":
        referer = request.headers.get("referer")
        if not referer:
            return False
        parts = urlsplit(referer)
        sent = f"{parts.scheme}://{parts.netloc}"
    mine = {f"{request.url.scheme}://{request.url.netloc}"}
    for served in state.served.values():
        public = served.link(None, "")
        if public:
            parts = urlsplit(public)
            mine.add(f"{parts.scheme}://{parts.netloc}")
    return sent in mine


def _root(request: Request) -> str:
    root: str = request.scope.get("root_path", "")
    return root.rstrip("/")


def _inbox(request: Request) -> str:
    return html.escape(_root(request) + "/inbox")


def _page(request: Request, status: int, title: str, text: str) -> Response:
    body = (
        f'<section class="card"><p>{html.escape(text)}</p></section>'
        f'<p><a href="{_inbox(request)}">Open the inbox</a></p>'
    )
    return _html(status, title, body)


def _html(status: int, title: str, body: str) -> Response:
    page = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)} · interlock</title><style>{_STYLE}</style></head>"
        f"<body><main><h1>{html.escape(title)}</h1>{body}</main></body></html>"
    )
    return Response(
        page,
        status,
        media_type="text/html; charset=utf-8",
        headers={
            "Content-Security-Policy": _CSP,
            "Cache-Control": "no-store",
            # The browser's Origin on the confirmation's POST is this server's, never the
            # link's path: the token does not travel in a Referer.
            "Referrer-Policy": "strict-origin",
        },
    )
