"""Approvals in Slack: the server posts each question to a fake of Slack's Web API on loopback,
and takes decisions from interactions signed as Slack signs them.

The server runs for real (uvicorn on a free port, a SQLite file or PostgreSQL); the fake speaks
Slack's wire format and records every call. Nothing of the server is stubbed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx2 as httpx
import pytest
from _notify_receiver import closed_port
from _serving import TOKENS, auth, bearer, order_graph, serving, wait_for
from _slack_fake import (
    SIGNING_SECRET,
    TOKEN,
    Call,
    FakeSlack,
    button,
    fake_slack,
    signed,
    submission,
)

from interlock import App, Authority, SqliteStore
from interlock.agents import (
    ApprovalPolicy,
    ScriptedModel,
    ToolAgent,
    ToolMessage,
    UserMessage,
    call,
    require_approval,
    tool,
)
from interlock.server import Notifier, Slack, create_app
from interlock.stores import PostgresStore, Store

CHANNEL = "C0APPROVALS"
PUBLIC = "https://approvals.example.com"


@tool
def transfer(
    account: str,
    amount: int,
    currency: Literal["EUR", "USD"] = "EUR",
    urgent: bool = False,
    tags: list[str] | None = None,
) -> str:
    """Move money to an account.

    Args:
        account: The account to pay.
        amount: How much.
        currency: In which currency.
        urgent: Pay today.
        tags: Labels for the books.
    """
    return f"sent {amount} {currency} to {account}" + (" today" if urgent else "")


def bank_agent(
    store: Store, *, confirm: bool = False, authority: Authority | None = None
) -> App[Any]:
    """An agent that asks to transfer 120 EUR to acct-1 and reports what the tool said."""

    def script(messages: Any, tools: Any) -> Any:
        last = messages[-1]
        if isinstance(last, UserMessage):
            return call("transfer", {"account": "acct-1", "amount": 120})
        assert isinstance(last, ToolMessage)
        return f"Done: {last.content}"

    rule = require_approval(name="payments", confirm=confirm, authority=authority)
    policy = ApprovalPolicy({"transfer": [rule]})
    agent = ToolAgent("banker", ScriptedModel(script, name="bank"), [transfer], policy=policy)
    return agent.compile(store=store)


async def _people(store: Store) -> None:
    """ana is mapped by her Slack id; ben by his e-mail address; fin is in finance."""
    await store.add_principal("ana", role="approver")
    await store.update_principal("ana", slack_user="UANA")
    await store.add_principal("ben", role="approver", groups=("finance",))
    await store.update_principal("ben", email="ben@example.com")
    await store.add_principal("off", role="approver")
    await store.update_principal("off", slack_user="UOFF", disabled=True)


@dataclass
class Bench:
    """A server with the Slack channel, the fake Slack, and a client of the server."""

    url: str
    slack: FakeSlack
    client: httpx.Client
    read: Callable[[], Store]

    def ask(self, thread: str, *, posts: int = 1) -> Call:
        """Start the agent on ``thread``; the question's message as Slack received it."""
        body = {"input": {"messages": [{"role": "user", "content": "pay"}]}}
        answer = self.client.post(f"/v1/threads/{thread}/runs", json=body, headers=bearer("ana"))
        assert answer.status_code == 202, answer.text
        return self.slack.wait_for("chat.postMessage", posts)[-1]

    def interact(self, payload: dict[str, Any], **sign: Any) -> httpx.Response:
        body, headers = signed(payload, **sign)
        return self.client.post("/slack/interactions", content=body, headers=headers)

    def press(self, message: Call, action: str, user: str) -> httpx.Response:
        answer = self.interact(button(message, action, user))
        assert answer.status_code == 200, answer.text
        return answer

    def submit(self, opened: Call, user: str, values: dict[str, Any]) -> httpx.Response:
        answer = self.interact(submission(opened, user, values))
        assert answer.status_code == 200, answer.text
        return answer

    def pending(self) -> list[dict[str, Any]]:
        answer = self.client.get("/v1/interrupts", headers=bearer("root"))
        assert answer.status_code == 200, answer.text
        return list(answer.json()["items"])

    def decisions(self, thread: str) -> list[tuple[str | None, Any]]:
        async def go() -> list[tuple[str | None, Any]]:
            store = self.read()
            try:
                entries = await store.audit_log(thread=thread)
                return [(e.actor, e.data) for e in entries if e.kind == "decision"]
            finally:
                await store.close()

        return anyio.run(go)

    def thread(self, thread: str) -> dict[str, Any]:
        answer = self.client.get(f"/v1/threads/{thread}", headers=bearer("root"))
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    def finished(self, thread: str) -> dict[str, Any]:
        return wait_for(lambda: (v := self.thread(thread))["status"] == "done" and v)

    def updates_saying(self, text: str, count: int = 1) -> list[Call]:
        def found() -> list[Call]:
            return [c for c in self.slack.of("chat.update") if text in _words(c)]

        return wait_for(lambda: len(found()) >= count and found())

    def ephemeral(self, user: str, count: int = 1) -> list[Call]:
        def found() -> list[Call]:
            return [c for c in self.slack.of("chat.postEphemeral") if c.args["user"] == user]

        return wait_for(lambda: len(found()) >= count and found())


def _words(message: Call) -> str:
    """What a posted or updated message says, its blocks included."""
    blocks = message.args.get("blocks", [])
    return message.args.get("text", "") + json.dumps(blocks)


def _slack(fake: FakeSlack, **options: Any) -> Slack:
    given: dict[str, Any] = {
        "channel": CHANNEL,
        "token": TOKEN,
        "signing_secret": SIGNING_SECRET,
        "base_url": fake.base_url,
        "backoff": 0.05,
        "max_backoff": 0.2,
        **options,
    }
    return Slack(**given)


@contextmanager
def bench(
    tmp_path: Path, *, agent: Callable[[Store], App[Any]] = bank_agent, **slack: Any
) -> Iterator[Bench]:
    path = tmp_path / "bank.db"

    async def prepare() -> None:
        store = SqliteStore(path)
        await _people(store)
        await store.close()

    anyio.run(prepare)
    with fake_slack() as fake:

        def factory() -> Any:
            notifier = Notifier([_slack(fake, **slack)])
            return create_app(
                agent(SqliteStore(path)),
                auth=auth(),
                notifier=notifier,
                public_url=PUBLIC,
                poll_interval=0.02,
            )

        with serving(factory) as running, httpx.Client(base_url=running.url) as client:
            yield Bench(running.url, fake, client, lambda: SqliteStore(path))


# --- deciding in Slack -----------------------------------------------------------------------


def test_a_question_is_posted_as_the_inbox_shows_it_and_approving_runs_the_call(
    tmp_path: Path,
) -> None:
    with bench(tmp_path) as b:
        message = b.ask("t-approve")
        assert message.args["channel"] == CHANNEL
        shown = _words(message)
        for expected in ("banker", "transfer", "acct-1", "120", "payments", "Who may decide"):
            assert expected in shown, expected
        assert f"{PUBLIC}/inbox#/interrupts/" in shown
        actions = [
            e["action_id"]
            for block in message.args["blocks"]
            for e in block.get("elements", ())
            if block["type"] == "actions"
        ]
        assert actions[:4] == [
            "interlock.approve",
            "interlock.reject",
            "interlock.edit",
            "interlock.respond",
        ]
        (item,) = b.pending()

        b.press(message, "interlock.approve", "UANA")

        update = b.updates_saying("Approved by ana")[0]
        assert (update.args["channel"], update.args["ts"]) == (CHANNEL, message.answer["ts"])
        assert "interlock.approve" not in _words(update), "the buttons go once decided"
        view = b.finished("t-approve")
        assert "sent 120 EUR to acct-1" in json.dumps(view["messages"])
        ((actor, _),) = b.decisions("t-approve")
        assert actor == "ana"
        assert b.pending() == [] and item["status"] == "pending"


def test_reject_asks_a_reason_in_a_modal_and_the_model_is_told_it(tmp_path: Path) -> None:
    with bench(tmp_path) as b:
        message = b.ask("t-reject")
        b.press(message, "interlock.reject", "UANA")
        (opened,) = b.slack.wait_for("views.open")
        assert opened.args["trigger_id"].startswith("trigger-")
        assert b.decisions("t-reject") == [], "opening the modal records nothing"

        b.submit(
            opened,
            "UANA",
            {"reason": {"value": {"type": "plain_text_input", "value": "Wrong account"}}},
        )

        b.updates_saying("Rejected by ana")
        b.updates_saying("Wrong account")
        view = b.finished("t-reject")
        assert "Wrong account" in json.dumps(view["messages"])
        assert "sent 120" not in json.dumps(view["messages"])
        ((actor, _),) = b.decisions("t-reject")
        assert actor == "ana"


def _edit_values(**fields: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "account": {"value": {"type": "plain_text_input", "value": "acct-1"}},
        "amount": {"value": {"type": "number_input", "value": "120"}},
        "currency": {"value": {"type": "static_select", "selected_option": None}},
        "urgent": {"value": {"type": "checkboxes", "selected_options": []}},
        "tags": {"value": {"type": "plain_text_input", "value": None}},
    }
    for name, value in fields.items():
        values[name] = {"value": value}
    return values


def test_an_edit_that_breaks_the_schema_is_refused_in_the_modal_and_one_that_fits_runs(
    tmp_path: Path,
) -> None:
    with bench(tmp_path) as b:
        message = b.ask("t-edit")
        b.press(message, "interlock.edit", "UANA")
        (opened,) = b.slack.wait_for("views.open")
        modal = opened.args["view"]
        fields = {block["block_id"]: block["element"]["type"] for block in modal["blocks"][1:]}
        assert fields == {
            "account": "plain_text_input",
            "amount": "number_input",
            "currency": "static_select",
            "urgent": "checkboxes",
            "tags": "plain_text_input",
        }

        bad = _edit_values(tags={"type": "plain_text_input", "value": '{"not": "a list"}'})
        refused = b.submit(opened, "UANA", bad)
        assert refused.json()["response_action"] == "errors"
        assert "tags" in refused.json()["errors"]
        not_json = b.submit(
            opened, "UANA", _edit_values(tags={"type": "plain_text_input", "value": "[oops"})
        )
        assert "JSON" in not_json.json()["errors"]["tags"]
        fraction = b.submit(
            opened, "UANA", _edit_values(amount={"type": "number_input", "value": "12.5"})
        )
        assert "whole number" in fraction.json()["errors"]["amount"]
        time.sleep(0.3)
        assert b.decisions("t-edit") == [], "a refused edit records nothing"
        assert [i["status"] for i in b.pending()] == ["pending"]

        usd = {"text": {"type": "plain_text", "text": "USD"}, "value": '"USD"'}
        good = _edit_values(
            amount={"type": "number_input", "value": "99"},
            currency={"type": "static_select", "selected_option": usd},
            urgent={"type": "checkboxes", "selected_options": [{"value": "true"}]},
            tags={"type": "plain_text_input", "value": '["rent"]'},
        )
        accepted = b.submit(opened, "UANA", good)
        assert accepted.content in (b"", b"null") or "response_action" not in accepted.json()

        b.updates_saying("Approved with edited arguments by ana")
        view = b.finished("t-edit")
        assert "sent 99 USD to acct-1 today" in json.dumps(view["messages"])


def test_respond_gives_an_answer_in_place_of_the_tool(tmp_path: Path) -> None:
    with bench(tmp_path) as b:
        message = b.ask("t-respond")
        b.press(message, "interlock.respond", "UANA")
        (opened,) = b.slack.wait_for("views.open")
        empty = b.submit(opened, "UANA", {"answer": {"value": {"value": "  "}}})
        assert empty.json()["response_action"] == "errors"
        b.submit(opened, "UANA", {"answer": {"value": {"value": "Paid by hand already"}}})

        b.updates_saying("Answered in place of the tool by ana")
        view = b.finished("t-respond")
        said = json.dumps(view["messages"])
        assert "Paid by hand already" in said and "sent 120" not in said


def test_a_question_that_asks_a_confirmation_gets_slacks_confirm_dialog(tmp_path: Path) -> None:
    with bench(tmp_path, agent=lambda s: bank_agent(s, confirm=True)) as b:
        message = b.ask("t-confirm")
        (approve,) = [
            e
            for block in message.args["blocks"]
            for e in block.get("elements", ())
            if e.get("action_id") == "interlock.approve"
        ]
        assert approve["confirm"]["confirm"]["text"] == "Approve"
        b.press(message, "interlock.approve", "UANA")
        b.updates_saying("Approved by ana")
        b.finished("t-confirm")


# --- who decides -----------------------------------------------------------------------------


def test_an_unmapped_slack_user_is_told_how_to_get_mapped_and_nothing_is_recorded(
    tmp_path: Path,
) -> None:
    with bench(tmp_path) as b:
        message = b.ask("t-unmapped")
        b.slack.users["UEVE"] = {
            "id": "UEVE",
            "is_bot": False,
            "is_email_confirmed": False,
            "profile": {"email": "ben@example.com"},
        }
        b.press(message, "interlock.approve", "UNOBODY")
        (told,) = b.ephemeral("UNOBODY")
        assert "interlock principal update NAME --slack-user UNOBODY" in told.args["text"]
        assert told.args["channel"] == CHANNEL
        # An address Slack has not verified maps nobody (else anyone could claim ben's).
        b.press(message, "interlock.approve", "UEVE")
        b.ephemeral("UEVE")
        # A disabled principal decides nothing either.
        b.press(message, "interlock.approve", "UOFF")
        (off,) = b.ephemeral("UOFF")
        assert "disabled" in off.args["text"]
        b.press(message, "interlock.reject", "UNOBODY")
        b.ephemeral("UNOBODY", 2)
        assert b.slack.of("views.open") == [], "no modal for someone who cannot decide"
        assert b.decisions("t-unmapped") == []
        assert [i["status"] for i in b.pending()] == ["pending"]


def test_a_user_is_mapped_by_the_verified_email_slack_gives(tmp_path: Path) -> None:
    with bench(tmp_path) as b:
        b.slack.users["UBEN"] = {
            "id": "UBEN",
            "is_bot": False,
            "is_email_confirmed": True,
            "profile": {"email": "ben@example.com"},
        }
        message = b.ask("t-email")
        b.press(message, "interlock.approve", "UBEN")
        b.updates_saying("Approved by ben")
        ((actor, _),) = b.decisions("t-email")
        assert actor == "ben"
        assert b.slack.of("users.info")[0].args["user"] == "UBEN"


def test_someone_outside_the_questions_authority_is_refused_ephemerally(tmp_path: Path) -> None:
    agent = lambda s: bank_agent(s, authority=Authority(groups=("finance",)))  # noqa: E731
    with bench(tmp_path, agent=agent) as b:
        b.slack.users["UBEN"] = {
            "id": "UBEN",
            "is_email_confirmed": True,
            "profile": {"email": "ben@example.com"},
        }
        message = b.ask("t-authority")
        assert "finance" in _words(message)
        b.press(message, "interlock.approve", "UANA")
        (told,) = b.ephemeral("UANA")
        assert told.args["text"].startswith("Nothing was recorded")
        assert "finance" in told.args["text"]
        time.sleep(0.2)
        assert b.decisions("t-authority") == []
        assert b.slack.of("chat.update") == []

        b.press(message, "interlock.approve", "UBEN")
        b.updates_saying("Approved by ben")


def test_a_decision_already_made_is_refused_with_who_and_when(tmp_path: Path) -> None:
    with bench(tmp_path) as b:
        b.slack.users["UBEN"] = {
            "id": "UBEN",
            "is_email_confirmed": True,
            "profile": {"email": "ben@example.com"},
        }
        message = b.ask("t-twice")
        b.press(message, "interlock.approve", "UANA")
        b.updates_saying("Approved by ana")
        b.press(message, "interlock.approve", "UBEN")
        (told,) = b.ephemeral("UBEN")
        assert "already decided by ana at" in told.args["text"]
        b.press(message, "interlock.edit", "UBEN")
        late = b.ephemeral("UBEN", 2)[-1]
        assert late.args["text"].startswith("Nothing to decide any more: Approved by ana at")
        assert b.slack.of("views.open") == []
        assert len(b.decisions("t-twice")) == 1


def test_a_message_of_a_question_that_changed_since_is_refused_and_shown_anew(
    tmp_path: Path,
) -> None:
    with bench(tmp_path) as b:
        message = b.ask("t-stale")
        # The press carries the payload hash of the question as the message showed it; one
        # that no longer matches the question is a stale view.
        pressed = button(message, "interlock.approve", "UANA")
        value = json.loads(pressed["actions"][0]["value"])
        pressed["actions"][0]["value"] = json.dumps({**value, "h": "0" * len(value["h"])})
        assert b.interact(pressed).status_code == 200
        (told,) = b.ephemeral("UANA")
        assert told.args["text"].startswith("Nothing was recorded: the question changed")
        assert b.decisions("t-stale") == []
        assert len(b.pending()) == 1
        # The message is shown again as the question is now.
        wait_for(lambda: b.slack.of("chat.update"))


# --- the signature ---------------------------------------------------------------------------


def test_a_forged_or_old_interaction_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    with bench(tmp_path) as b:
        message = b.ask("t-forged")
        payload = button(message, "interlock.approve", "UANA")
        forged = b.interact(payload, secret="not the signing secret")
        assert forged.status_code == 401
        assert "signed" in forged.json()["message"]
        old = b.interact(payload, at=int(time.time()) - 6 * 60)
        assert old.status_code == 401
        future = b.interact(payload, at=int(time.time()) + 6 * 60)
        assert future.status_code == 401
        body, headers = signed(payload)
        tampered = body.replace(b"UANA", b"UBEN")
        assert (
            b.client.post("/slack/interactions", content=tampered, headers=headers).status_code
            == 401
        )
        unsigned = {k: v for k, v in headers.items() if k != "X-Slack-Signature"}
        assert (
            b.client.post("/slack/interactions", content=body, headers=unsigned).status_code == 401
        )
        garbage = {**headers, "X-Slack-Request-Timestamp": "soon"}
        assert (
            b.client.post("/slack/interactions", content=body, headers=garbage).status_code == 401
        )
        # Signed but not a payload: refused after the check, not a server error.
        junk, junk_headers = signed({})
        bad = b.client.post("/slack/interactions", content=b"x" + junk, headers=junk_headers)
        assert bad.status_code == 401
        time.sleep(0.3)
        assert b.decisions("t-forged") == []
        assert b.slack.of("chat.postEphemeral") == []


def test_slack_delivering_one_interaction_twice_records_one_decision(tmp_path: Path) -> None:
    with bench(tmp_path) as b:
        message = b.ask("t-retried")
        body, headers = signed(button(message, "interlock.approve", "UANA"))
        first = b.client.post("/slack/interactions", content=body, headers=headers)
        again = b.client.post("/slack/interactions", content=body, headers=headers)
        assert first.status_code == again.status_code == 200
        b.updates_saying("Approved by ana")
        b.finished("t-retried")
        time.sleep(0.3)
        assert len(b.decisions("t-retried")) == 1
        assert b.slack.of("chat.postEphemeral") == [], "a replay is no refusal"


# --- the message follows the question --------------------------------------------------------


def test_a_decision_in_the_http_api_updates_the_slack_message(tmp_path: Path) -> None:
    with bench(tmp_path) as b:
        message = b.ask("t-http")
        (item,) = b.pending()
        body = {
            "answer": {"action": "reject", "message": "no"},
            "payload_hash": item["payload_hash"],
        }
        headers = {**bearer("ben"), "Idempotency-Key": "k-1"}
        decided = b.client.post(f"/v1/interrupts/{item['id']}/decision", json=body, headers=headers)
        assert decided.status_code == 201, decided.text
        update = b.updates_saying("Rejected by ben")[0]
        assert update.args["channel"] == message.args["channel"]
        assert "interlock.approve" not in _words(update)
        assert TOKENS["ben"][1].name == "ben"


def test_slack_down_leaves_the_question_pending_and_the_log_shows_the_retries(
    tmp_path: Path,
) -> None:
    with bench(tmp_path, max_attempts=3) as b:
        b.slack.fail_next(3, status=503, retry_after="0")
        body = {"input": {"messages": [{"role": "user", "content": "pay"}]}}
        b.client.post("/v1/threads/t-down/runs", json=body, headers=bearer("ana"))
        b.slack.wait_for("failed:chat.postMessage", 3)

        def deliveries() -> list[dict[str, Any]]:
            got = b.client.get("/v1/deliveries", headers=bearer("root")).json()["items"]
            return [d for d in got if d["event_type"] == "interrupt.created"]

        log = wait_for(lambda: (d := deliveries()) and d[-1]["outcome"] == "failed" and d)
        assert [d["outcome"] for d in log] == ["retrying", "retrying", "failed"]
        assert all(d["status"] == 503 and d["channel"] == "slack" for d in log)
        assert "gave up after 3 attempts" in log[-1]["error"]
        assert [i["status"] for i in b.pending()] == ["pending"]
        assert b.slack.of("chat.postMessage") == []

        b.slack.fail_next(2, status=429, retry_after="0")
        b.ask("t-back")
        back = wait_for(
            lambda: (
                [d["outcome"] for d in deliveries() if d["event_id"] != log[0]["event_id"]][-1:]
                == ["delivered"]
                and deliveries()
            )
        )
        outcomes = [d["outcome"] for d in back if d["event_id"] != log[0]["event_id"]]
        assert outcomes == ["retrying", "retrying", "delivered"]
        assert len(b.pending()) == 2


def test_two_servers_on_one_postgresql_post_one_message(dsn: str) -> None:
    async def prepare() -> None:
        store = PostgresStore(dsn)
        await _people(store)
        await store.close()

    anyio.run(prepare)
    with fake_slack() as fake:

        def factory() -> Any:
            return create_app(
                bank_agent(PostgresStore(dsn)),
                auth=auth(),
                notifier=Notifier([_slack(fake)]),
                poll_interval=0.02,
            )

        with (
            serving(factory) as one,
            serving(factory) as two,
            httpx.Client(base_url=one.url) as client,
        ):
            b = Bench(one.url, fake, client, lambda: PostgresStore(dsn))
            for n in range(3):
                b.ask(f"t-pg-{n}", posts=n + 1)
            time.sleep(0.5)
            posted = fake.of("chat.postMessage")
            assert len(posted) == 3, [c.args["text"] for c in posted]
            # Decided through the other server: the message is updated (once per process
            # at most, each rebuilt from the question as recorded).
            with httpx.Client(base_url=two.url) as other:
                b2 = Bench(two.url, fake, other, lambda: PostgresStore(dsn))
                b2.press(posted[0], "interlock.approve", "UANA")
                b2.updates_saying("Approved by ana")
                b2.finished("t-pg-0")
            assert len(b.decisions("t-pg-0")) == 1


def test_a_plain_question_is_approved_or_rejected_with_a_reason(tmp_path: Path) -> None:
    with bench(tmp_path, agent=lambda s: order_graph().compile(store=s)) as b:
        body = {"input": {"n": 1}}
        for thread in ("o-yes", "o-no"):
            answer = b.client.post(f"/v1/threads/{thread}/runs", json=body, headers=bearer("ana"))
            assert answer.status_code == 202, answer.text
        yes, no = sorted(b.slack.wait_for("chat.postMessage", 2), key=lambda c: "o-no" in _words(c))
        assert "interlock.edit" not in _words(yes) and "interlock.reject" in _words(yes)
        b.press(yes, "interlock.approve", "UANA")
        b.press(no, "interlock.reject", "UANA")
        (opened,) = b.slack.wait_for("views.open")
        b.submit(opened, "UANA", {"reason": {"value": {"value": "Out of stock"}}})
        b.updates_saying("Approved by ana")
        b.updates_saying("Rejected by ana at")
        assert b.finished("o-yes")["values"]["approved"] is True
        assert b.finished("o-no")["values"]["approved"] is False


def test_a_route_sends_a_tools_questions_to_a_person_by_direct_message(tmp_path: Path) -> None:
    with bench(tmp_path, channel=None, routes={"trans*": "UFIN"}) as b:
        message = b.ask("t-dm")
        (opened,) = b.slack.of("conversations.open")
        assert opened.args["users"] == "UFIN"
        assert message.args["channel"] == opened.answer["channel"]["id"]


def test_an_edit_of_a_question_that_asks_a_confirmation_needs_the_box_ticked(
    tmp_path: Path,
) -> None:
    with bench(tmp_path, agent=lambda s: bank_agent(s, confirm=True)) as b:
        message = b.ask("t-confirm-edit")
        b.press(message, "interlock.edit", "UANA")
        (opened,) = b.slack.wait_for("views.open")
        assert opened.args["view"]["blocks"][-1]["block_id"] == "interlock.confirm"
        values = _edit_values(amount={"type": "number_input", "value": "7"})
        unticked = b.submit(opened, "UANA", values)
        assert "interlock.confirm" in unticked.json()["errors"]
        time.sleep(0.2)
        assert b.decisions("t-confirm-edit") == []
        ticked = {
            **values,
            "interlock.confirm": {"value": {"selected_options": [{"value": "true"}]}},
        }
        b.submit(opened, "UANA", ticked)
        b.updates_saying("Approved with edited arguments by ana")
        assert "sent 7 EUR" in json.dumps(b.finished("t-confirm-edit")["messages"])


@pytest.mark.parametrize(
    ("options", "outcomes", "error"),
    [
        ({"token": "xoxb-revoked"}, ["failed"], "invalid_auth (check the bot token)"),
        ({"channel": "X0NOSUCH"}, ["failed"], "channel_not_found (check the channel id"),
        (
            {"base_url": f"http://127.0.0.1:{closed_port()}/api/", "max_attempts": 2},
            ["retrying", "failed"],
            "Slack did not answer",
        ),
    ],
)
def test_a_bad_token_or_channel_fails_at_once_and_an_unreachable_slack_is_retried(
    tmp_path: Path, options: dict[str, Any], outcomes: list[str], error: str
) -> None:
    with bench(tmp_path, **options) as b:
        body = {"input": {"messages": [{"role": "user", "content": "pay"}]}}
        b.client.post("/v1/threads/t-bad/runs", json=body, headers=bearer("ana"))

        def deliveries() -> list[dict[str, Any]]:
            got = b.client.get("/v1/deliveries", headers=bearer("root")).json()["items"]
            return [d for d in got if d["event_type"] == "interrupt.created"]

        log = wait_for(lambda: (d := deliveries()) and d[-1]["outcome"] == "failed" and d)
        assert [d["outcome"] for d in log] == outcomes
        assert error in log[-1]["error"]
        assert [i["status"] for i in b.pending()] == ["pending"]
