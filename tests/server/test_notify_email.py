"""Email notifications, sent over real SMTP to an aiosmtpd server on loopback."""

from __future__ import annotations

from pathlib import Path

import pytest
from _notify_events import event
from _notify_mailbox import Mailbox, tls_pair
from _notify_receiver import closed_port

from interlock.server._notify import Email, Notifier

pytestmark = pytest.mark.anyio

SENDER = "interlock@example.com"


def email(mailbox: Mailbox, **options: object) -> Email:
    settings: dict[str, object] = {
        "sender": SENDER,
        "recipients": ["ada@example.com", "bob@example.com"],
        "backoff": 0.01,
        "timeout": 5.0,
        **options,
    }
    return Email(mailbox.host, mailbox.port, **settings)  # type: ignore[arg-type]


async def test_the_message_says_what_waits_and_where() -> None:
    with Mailbox() as mailbox:
        notifier = Notifier([email(mailbox)])
        async with notifier:
            await notifier.publish(event("1842"))
            await notifier.wait_idle()
        (mail,) = mailbox.mail

    assert mail.mail_from == SENDER
    assert mail.rcpt_tos == ["ada@example.com", "bob@example.com"]
    message = mail.message
    assert message["Subject"] == "[interlock] Decision needed: Refund ¥5000 to ada?"
    assert message["From"] == SENDER
    assert message["To"] == "ada@example.com, bob@example.com"
    assert message["Interlock-Event-Id"] == "1842"
    assert message["Interlock-Event-Type"] == "interrupt.created"
    assert message["Message-ID"].endswith("@example.com>")
    assert message["Date"]
    assert message.get_content_type() == "text/plain"
    body = message.get_content()
    assert body.splitlines() == [
        "Decision needed: Refund ¥5000 to ada?",
        "",
        "Thread:    order-42",
        "App:       payments",
        "Tool:      refund",
        "Interrupt: i-7f3a",
        "Open:      https://inbox.example.com/i/7f3a",
        "",
        "interrupt.created at 2024-06-10 06:13:20 UTC (event 1842)",
    ]
    (entry,) = notifier.log.entries()
    assert (entry.outcome, entry.status, entry.channel) == (
        "delivered",
        250,
        f"email 127.0.0.1:{mailbox.port}",
    )


async def test_a_decision_names_who_decided_and_the_same_event_keeps_its_message_id() -> None:
    with Mailbox() as mailbox:
        notifier = Notifier([email(mailbox, subject_prefix="[ops]", events=["interrupt.decided"])])
        async with notifier:
            decided = event("20", "interrupt.decided", actor="ada", url=None, tool=None)
            await notifier.publish(decided)
            await notifier.publish(event("21", "interrupt.created"))  # not asked for
            await notifier.wait_idle()
            await notifier.publish(decided)
            await notifier.wait_idle()
        first, again = mailbox.mail

    assert first.message["Subject"] == "[ops] Decided by ada: Refund ¥5000 to ada?"
    body = first.message.get_content()
    assert "Decided by: ada" in body and "Open:" not in body and "Tool:" not in body
    assert first.message["Message-ID"] == again.message["Message-ID"]
    assert {e.event_id for e in notifier.log.entries()} == {"20"}


async def test_a_thread_id_stored_with_a_line_break_still_gets_its_mail() -> None:
    # New ids cannot hold control characters; a thread stored before that rule still can.
    with Mailbox() as mailbox:
        notifier = Notifier([email(mailbox, events=["interrupt.decided"])])
        async with notifier:
            odd = event(
                "30", "interrupt.decided", thread="order\r\n42", actor="ada\u2028x", summary=""
            )
            await notifier.publish(odd)
            await notifier.wait_idle()
        (mail,) = mailbox.mail

    subject = mail.message["Subject"]
    assert subject == "[interlock] Decided by ada\\u2028x on thread order\\x0d\\x0a42"
    body = mail.message.get_content().splitlines()
    assert "Thread:     order\\x0d\\x0a42" in body and "Decided by: ada\\u2028x" in body
    (entry,) = notifier.log.entries()
    assert entry.outcome == "delivered"


async def test_a_greylisting_server_is_retried_until_it_accepts() -> None:
    greylisted = "451 4.7.1 greylisted, try again later"
    with Mailbox(refuse_senders=[greylisted, greylisted]) as mailbox:
        notifier = Notifier([email(mailbox)])
        async with notifier:
            await notifier.publish(event("5"))
            await notifier.wait_idle()
        assert mailbox.sessions == 3
        (mail,) = mailbox.mail
    assert mail.message["Interlock-Event-Id"] == "5"
    entries = notifier.log.entries(event_id="5")
    assert [(e.attempt, e.outcome, e.status) for e in entries] == [
        (1, "retrying", 451),
        (2, "retrying", 451),
        (3, "delivered", 250),
    ]
    assert entries[0].error is not None and "greylisted" in entries[0].error


async def test_a_permanent_refusal_is_not_retried() -> None:
    with Mailbox(refuse_senders=["550 5.7.1 relaying denied"]) as mailbox:
        notifier = Notifier([email(mailbox)])
        async with notifier:
            await notifier.publish(event("6"))
            await notifier.wait_idle()
        assert mailbox.sessions == 1 and mailbox.mail == []
    (entry,) = notifier.log.entries()
    assert (entry.outcome, entry.status, entry.attempt) == ("failed", 550, 1)
    assert entry.error is not None and "relaying denied" in entry.error


async def test_unknown_recipients_fail_and_known_ones_still_get_it() -> None:
    with Mailbox(unknown={"bob@example.com"}) as mailbox:
        partly = Notifier([email(mailbox)])
        async with partly:
            await partly.publish(event("7"))
            await partly.wait_idle()
        nobody = Notifier([email(mailbox, recipients=["bob@example.com"])])
        async with nobody:
            await nobody.publish(event("8"))
            await nobody.wait_idle()
        (mail,) = mailbox.mail
    assert mail.rcpt_tos == ["ada@example.com"]
    (delivered,) = partly.log.entries()
    assert delivered.outcome == "delivered"
    assert delivered.error == "refused by the server: bob@example.com"
    (failed,) = nobody.log.entries()
    assert (failed.outcome, failed.status, failed.attempt) == ("failed", 550, 1)
    assert failed.error is not None and "no such mailbox" in failed.error


async def test_it_logs_in_over_starttls_and_a_wrong_password_is_not_retried(
    tmp_path: Path,
) -> None:
    pytest.importorskip("cryptography")
    server_tls, client_tls = tls_pair(tmp_path)
    secure = {"starttls": True, "ssl_context": client_tls, "username": "interlock"}
    with Mailbox(logins={"interlock": "app password"}, tls=server_tls) as mailbox:
        good = Notifier([email(mailbox, **secure, password="app password")])
        bad = Notifier([email(mailbox, **secure, password="guess")])
        untrusting = Notifier([email(mailbox, starttls=True)])
        async with good, bad, untrusting:
            await good.publish(event("9"))
            await bad.publish(event("10"))
            await untrusting.publish(event("11"))
            await good.wait_idle()
            await bad.wait_idle()
            await untrusting.wait_idle()
        (mail,) = mailbox.mail
    assert mail.login == "interlock" and mail.message["Interlock-Event-Id"] == "9"
    assert [e.outcome for e in good.log.entries()] == ["delivered"]
    (refused,) = bad.log.entries()
    assert (refused.outcome, refused.status, refused.attempt) == ("failed", 535, 1)
    # The system's CAs do not know the test certificate: a bad certificate is not retried.
    (unverified,) = untrusting.log.entries()
    assert (unverified.outcome, unverified.attempt) == ("failed", 1)
    assert unverified.error is not None and "SSLCertVerificationError" in unverified.error


async def test_starttls_to_a_server_without_it_is_not_retried() -> None:
    with Mailbox() as mailbox:
        notifier = Notifier([email(mailbox, starttls=True)])
        async with notifier:
            await notifier.publish(event("12"))
            await notifier.wait_idle()
        assert mailbox.mail == []
    (entry,) = notifier.log.entries()
    assert (entry.outcome, entry.attempt) == ("failed", 1)
    assert entry.error is not None and "STARTTLS" in entry.error


async def test_a_server_that_is_down_is_retried_then_given_up() -> None:
    channel = Email(
        "127.0.0.1",
        closed_port(),
        sender=SENDER,
        recipients=["ada@example.com"],
        max_attempts=2,
        backoff=0.01,
    )
    notifier = Notifier([channel])
    async with notifier:
        await notifier.publish(event("11"))
        await notifier.wait_idle()
    first, last = notifier.log.entries()
    assert (first.outcome, last.outcome) == ("retrying", "failed")
    assert last.error is not None and "gave up after 2 attempts" in last.error
    assert "ConnectionRefusedError" in last.error


def test_email_arguments_are_checked() -> None:
    with pytest.raises(TypeError, match=r"write recipients=\['ada@example.com'\]"):
        Email("smtp.example.com", sender=SENDER, recipients="ada@example.com")
    with pytest.raises(ValueError, match="recipients is empty"):
        Email("smtp.example.com", sender=SENDER, recipients=[])
    with pytest.raises(ValueError, match="exclude each other"):
        Email("smtp.example.com", sender=SENDER, recipients=["a@b"], starttls=True, use_tls=True)
    with pytest.raises(ValueError, match="both username and password"):
        Email("smtp.example.com", sender=SENDER, recipients=["a@b"], username="me")
    with pytest.raises(ValueError, match="sender must be an email address"):
        Email("smtp.example.com", sender="a@b\r\nBcc: everyone@example.com", recipients=["a@b"])
    channel = Email("smtp.example.com", 587, sender=SENDER, recipients=["a@b"], password=None)
    assert channel.name == "email smtp.example.com:587"
    assert "events=['interrupt.created', 'interrupt.decided', 'interrupt.expired']" in repr(channel)
