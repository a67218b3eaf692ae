"""`interlock approve | reject | edit | respond | answer | resume`: decisions, recorded and run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _cli_run import APP, Approvers
from click.testing import CliRunner

from interlock.agents import AssistantMessage
from interlock.cli import _decide
from interlock.cli import cli as cli_main


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Approvers:
    return Approvers(tmp_path, monkeypatch)


def last_words(cli: Approvers, thread: str) -> str:
    """What the agent said last."""
    last = cli.values(thread)["messages"][-1]
    assert isinstance(last, AssistantMessage)
    return last.content


def test_approve_records_the_os_user_and_continues_the_thread(cli: Approvers) -> None:
    asked = cli.start("refund", "order-1")
    result = cli.decide("approve", asked, env={"LOGNAME": "ada", "USER": "ada"})
    assert result.exit_code == 0, result.output
    assert f"Recorded: approve (true) on {asked} (thread order-1) by ada." in result.stdout
    assert "Thread order-1 is done." in result.stdout
    assert cli.values("order-1")["refunded"] is True
    ((actor, data),) = cli.decisions("order-1")
    assert actor == "ada" and data["answer"] is True
    assert data["payload_hash"] == cli.json("show", asked)["payload_hash"]  # seen as read


def test_actor_option_is_recorded_in_the_decision_and_the_audit_log(cli: Approvers) -> None:
    asked = cli.start("refund", "order-2")
    result = cli.decide("reject", asked, "--reason", "duplicate", "--actor", "grace")
    assert result.exit_code == 0, result.output
    assert cli.values("order-2")["refunded"] is False
    ((actor, data),) = cli.decisions("order-2")
    assert (actor, data["answer"], data["reason"]) == ("grace", False, "duplicate")
    decision = cli.json("show", asked)["decision"]
    assert decision["actor"] == "grace" and decision["reason"] == "duplicate"


def test_reject_needs_a_reason(cli: Approvers) -> None:
    asked = cli.start("refund", "order-3")
    result = cli.decide("reject", asked)
    assert result.exit_code == 2
    assert "Missing option '--reason'" in result.output
    assert cli.interrupt(asked).status == "pending"


def test_reject_a_tool_call_tells_the_model_why(cli: Approvers) -> None:
    asked = cli.start("ops", "ticket-1", messages=["rm -rf /srv/cache"])
    result = cli.decide("reject", asked, "--reason", "not during the sale")
    assert result.exit_code == 0, result.output
    assert last_words(cli, "ticket-1") == "Finished (rejected): not during the sale"
    ((_, data),) = cli.decisions("ticket-1")
    assert data["answer"] == {"action": "reject", "message": "not during the sale"}


def test_approve_a_tool_call_runs_it_with_the_arguments_shown(cli: Approvers) -> None:
    asked = cli.start("ops", "ticket-2", messages=["ls -l"])
    result = cli.decide("approve", asked, "--reason", "harmless")
    assert result.exit_code == 0, result.output
    assert "Thread ticket-2 is done." in result.stdout
    assert last_words(cli, "ticket-2") == "Finished (ok): ran: ls -l"
    ((_, data),) = cli.decisions("ticket-2")
    assert data["answer"] == {"action": "approve"} and data["reason"] == "harmless"


def test_edit_runs_the_call_with_new_arguments_and_audits_the_diff(cli: Approvers) -> None:
    asked = cli.start("ops", "ticket-3", messages=["rm -rf /srv"])
    result = cli.decide("edit", asked, "--arguments", '{"command": "rm -rf /srv/tmp"}')
    assert result.exit_code == 0, result.output
    assert last_words(cli, "ticket-3") == "Finished (ok): ran: rm -rf /srv/tmp"
    ((_, data),) = cli.decisions("ticket-3")
    assert data["details"]["diff"] == [
        {"op": "replace", "path": "/command", "before": "rm -rf /srv", "after": "rm -rf /srv/tmp"}
    ]


def test_an_edit_that_fails_the_tools_schema_records_nothing(cli: Approvers) -> None:
    asked = cli.start("ops", "ticket-4", messages=["ls"])
    result = cli.decide("edit", asked, "--arguments", '{"cmd": "ls"}')
    assert result.exit_code == 1
    assert "'command' is a required property" in result.output
    assert "nothing was recorded" in result.output
    assert cli.interrupt(asked).status == "pending"
    assert cli.decisions("ticket-4") == []


@pytest.mark.parametrize("bad", ["[1, 2]", "{not json"])
def test_edit_arguments_must_be_a_json_object(cli: Approvers, bad: str) -> None:
    asked = cli.start("ops", "ticket-5", messages=["ls"])
    result = cli.decide("edit", asked, "--arguments", bad)
    assert result.exit_code == 2
    assert "Invalid value for '--arguments'" in result.output
    assert cli.interrupt(asked).status == "pending"


def test_respond_answers_in_place_of_the_tool(cli: Approvers) -> None:
    asked = cli.start("ops", "ticket-6", messages=["df -h"])
    result = cli.decide("respond", asked, "the disk is 40% full")
    assert result.exit_code == 0, result.output
    assert last_words(cli, "ticket-6") == "Finished (responded): the disk is 40% full"


@pytest.mark.parametrize("verb", ["edit", "respond"])
def test_tool_call_verbs_refuse_other_questions(cli: Approvers, verb: str) -> None:
    asked = cli.start("refund", "order-4")
    extra = ["--arguments", "{}"] if verb == "edit" else ["text"]
    result = cli.decide(verb, asked, *extra)
    assert result.exit_code == 1
    assert f"`interlock {verb}` is for an agent's tool calls" in result.output
    assert f"interlock approve {asked}" in result.output
    assert cli.interrupt(asked).status == "pending"


def test_answer_any_question_with_json(cli: Approvers) -> None:
    asked = cli.start("plan", "signup-1")
    result = cli.decide("answer", asked, '{"plan": "pro"}', "--reason", "loyal customer")
    assert result.exit_code == 0, result.output
    assert cli.values("signup-1")["plan"] == {"plan": "pro"}
    ((_, data),) = cli.decisions("signup-1")
    assert data["answer"] == {"plan": "pro"} and data["reason"] == "loyal customer"


def test_approve_on_a_question_that_takes_no_yes_or_no_points_to_answer(cli: Approvers) -> None:
    asked = cli.start("plan", "signup-2")
    result = cli.decide("approve", asked)
    assert result.exit_code == 1
    assert "This question does not take yes or no" in result.output
    assert f"interlock answer {asked} JSON" in result.output
    assert cli.interrupt(asked).status == "pending"
    assert cli.decisions("signup-2") == []


def test_a_second_decision_is_refused_naming_who_decided_first(cli: Approvers) -> None:
    asked = cli.start("refund", "order-5")
    first = cli.decide("approve", asked, "--actor", "ada", "--reason", "verified")
    assert first.exit_code == 0, first.output
    second = cli.decide("reject", asked, "--reason", "fraud", "--actor", "bob")
    assert second.exit_code == 1
    assert f"interrupt {asked} is already resolved: ada decided" in second.output
    assert "approve (true), reason: verified" in second.output
    assert "Nothing was recorded" in second.output
    assert [actor for actor, _ in cli.decisions("order-5")] == ["ada"]


def test_the_same_nonce_twice_is_not_an_error(cli: Approvers) -> None:
    asked = cli.start("refund", "order-6")
    first = cli.decide("approve", asked, "--nonce", "req-1", "--no-continue", "--actor", "ada")
    assert first.exit_code == 0, first.output
    again = cli.decide("approve", asked, "--nonce", "req-1", "--actor", "ada")
    assert again.exit_code == 0, again.output
    assert "Already recorded with nonce req-1: ada decided" in again.stdout
    assert "Thread order-6 is done." in again.stdout
    assert len(cli.decisions("order-6")) == 1


def test_no_continue_leaves_the_thread_decided_but_not_run(cli: Approvers) -> None:
    asked = cli.start("ops", "ticket-7", messages=["uptime"])
    result = cli.decide("approve", asked, "--no-continue")
    assert result.exit_code == 0, result.output
    assert f"continue it with: interlock resume ticket-7 --app {APP}" in result.stdout
    assert cli.interrupt(asked).status == "resolved"
    assert cli.thread("ticket-7").status == "ready"  # decided; its task has not run again
    assert not any(e.kind == "effect_started" for e in cli.audit("ticket-7"))  # nothing ran
    assert cli.json("inbox") == []  # no longer waiting on a person

    onward = cli.decide("resume", "ticket-7")
    assert onward.exit_code == 0, onward.output
    assert "Thread ticket-7 is done." in onward.stdout
    assert last_words(cli, "ticket-7") == "Finished (ok): ran: uptime"


def test_a_quorum_needs_two_different_people(cli: Approvers) -> None:
    asked = cli.start("quorum", "wire-2")
    first = cli.decide("approve", asked, "--actor", "ada", "--reason", "invoice matches")
    assert first.exit_code == 0, first.output
    assert f"Recorded ada's approval of {asked} (thread wire-2): 1 of 2 (ada)" in first.stdout
    assert "waits for 1 more approval(s) from other people" in first.stdout
    assert cli.interrupt(asked).status == "pending"

    again = cli.decide("approve", asked, "--actor", "ada")
    assert again.exit_code == 1
    assert f"'ada' already approved interrupt {asked} (1 of 2 approvals)" in again.output
    assert cli.interrupt(asked).status == "pending"

    second = cli.decide("approve", asked, "--actor", "bob")
    assert second.exit_code == 0, second.output
    assert "Thread wire-2 is done." in second.stdout
    assert cli.values("wire-2")["refunded"] is True
    kinds = [(e.kind, e.actor) for e in cli.audit("wire-2")]
    assert ("approval", "ada") in kinds and ("decision", "bob") in kinds
    history = cli.read("history", "wire-2").stdout
    assert "approve, 1 of 2 (ada), reason: invoice matches" in history


def test_resume_before_anyone_answered_says_what_to_do(cli: Approvers) -> None:
    cli.start("refund", "order-10")
    result = cli.decide("resume", "order-10")
    assert result.exit_code == 1
    assert "waits on questions nobody has answered yet" in result.output
    assert "interlock inbox --thread order-10" in result.output


def test_a_decision_without_the_app_is_a_usage_error(cli: Approvers) -> None:
    asked = cli.start("refund", "order-7")
    result = cli.read("approve", asked)
    assert result.exit_code == 2
    assert "`interlock approve` needs your app" in result.output
    assert "pass --app module:attribute or set INTERLOCK_APP" in result.output
    assert cli.interrupt(asked).status == "pending"


def test_deciding_an_unknown_id_exits_1(cli: Approvers) -> None:
    cli.start("refund", "order-8")
    result = cli.decide("approve", "ffffffffffffffffffff")
    assert result.exit_code == 1
    assert "no interrupt has the id 'ffffffffffffffffffff'" in result.output


def test_approve_from_another_process_than_the_one_that_asked(cli: Approvers) -> None:
    asked = cli.python("print(_cli_app.start('ops', 'remote-1', messages=['whoami']))")
    assert asked.returncode == 0, asked.stderr
    interrupt_id = asked.stdout.strip()

    done = cli.process("approve", interrupt_id, "--app", APP, "--actor", "ops-lead")
    assert done.returncode == 0, done.stderr
    assert f"Recorded: approve on {interrupt_id} (thread remote-1) by ops-lead." in done.stdout
    assert "Thread remote-1 is done." in done.stdout
    assert last_words(cli, "remote-1") == "Finished (ok): ran: whoami"
    assert [a for a, _ in cli.decisions("remote-1")] == ["ops-lead"]


def test_environment_variables_name_the_app_and_the_store(cli: Approvers) -> None:
    asked = cli.start("refund", "order-9")
    # A module in the current directory, which is on the import path: an App, not a factory.
    (cli.dir / "approvals.py").write_text("from _cli_app import make_app\n\napp = make_app()\n")
    listed = cli.process("inbox", "--json", env={"INTERLOCK_STORE": cli.store_url})
    assert listed.returncode == 0, listed.stderr
    assert [i["id"] for i in json.loads(listed.stdout)] == [asked]

    refused = cli.process("approve", asked, env={"INTERLOCK_STORE": cli.store_url})
    assert refused.returncode == 2
    assert "set INTERLOCK_APP" in refused.stderr

    os_user = {"LOGNAME": "eve", "USER": "eve"}
    done = cli.process("approve", asked, env={"INTERLOCK_APP": "approvals:app", **os_user})
    assert done.returncode == 0, done.stderr
    assert "Thread order-9 is done." in done.stdout
    assert cli.values("order-9")["refunded"] is True
    assert [a for a, _ in cli.decisions("order-9")] == ["eve"]


@pytest.mark.parametrize("given", [["--actor", "ada\r\nBcc: x"], ["--actor", "ada\x1b[2J"]])
def test_an_actor_that_would_break_a_line_is_refused_before_anything_is_recorded(
    cli: Approvers, given: list[str]
) -> None:
    asked = cli.start("refund", "order-9")
    result = cli.decide("approve", asked, *given)
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--actor'" in result.output
    assert "actor holds the character U+" in result.output
    # The user name this process runs as is held to the same rule.
    result = cli.decide("approve", asked, env={"LOGNAME": "ada\nx", "USER": "ada\nx"})
    assert result.exit_code == 2, result.output
    assert cli.interrupt(asked).status == "pending"
    assert cli.decisions("order-9") == []


def test_the_command_line_is_held_to_separation_of_duties(cli: Approvers) -> None:
    # The question says its run's starter may not approve it; the command line decides
    # through the runtime's check, as the server does, and names compare in normal form.
    asked = cli.start("payout", "pay-1", started_by="ana")
    shown = cli.decide("show", asked)
    assert shown.exit_code == 0, shown.output
    assert "who decides" in shown.stdout and "anyone may decide; not ana" in shown.stdout
    assert cli.json("show", asked)["authority"] == {"not_starter": True}
    for same in ("ana", "Ana", "ＡＮＡ"):
        refused = cli.decide("approve", asked, "--actor", same)
        assert refused.exit_code == 1, refused.output
        assert "started this run and may not approve it" in refused.output
        assert "Nothing was recorded" in refused.output
    assert cli.interrupt(asked).status == "pending" and cli.decisions("pay-1") == []
    spaced = cli.decide("approve", asked, "--actor", "ana ")
    assert spaced.exit_code == 2 and "white space" in spaced.output
    done = cli.decide("approve", asked, "--actor", "ben")
    assert done.exit_code == 0, done.output
    assert [actor for actor, _ in cli.decisions("pay-1")] == ["ben"]


def test_the_command_line_decides_as_the_stores_principal_and_overrides_with_a_reason(
    cli: Approvers,
) -> None:
    asked = cli.start("finance", "fin-1")
    for args in (
        ["principal", "add", "fay", "--group", "Finance"],
        ["principal", "add", "bo"],
        ["principal", "add", "root", "--role", "admin"],
        ["principal", "add", "dan", "--group", "finance"],
        ["principal", "disable", "dan"],
    ):
        made = cli.read(*args)
        assert made.exit_code == 0, made.output
    outside = cli.decide("approve", asked, "--actor", "bo", "--no-continue")
    assert outside.exit_code == 1 and "group finance" in outside.output
    disabled = cli.decide("approve", asked, "--actor", "dan", "--no-continue")
    assert disabled.exit_code == 1 and "disabled" in disabled.output
    not_admin = cli.decide(
        "approve", asked, "--actor", "bo", "--override", "I know", "--no-continue"
    )
    assert not_admin.exit_code == 1 and "admin" in not_admin.output
    assert cli.decisions("fin-1") == []
    done = cli.decide("approve", asked, "--actor", "root", "--override", "finance is out; INC-9")
    assert done.exit_code == 0, done.output
    [(actor, data)] = cli.decisions("fin-1")
    assert (actor, data["override"]) == ("root", "finance is out; INC-9")
    # A member of the group needs no override.
    again = cli.start("finance", "fin-2")
    member = cli.decide("approve", again, "--actor", "fay")
    assert member.exit_code == 0, member.output


def test_a_question_that_asks_for_confirmation_is_confirmed_or_nothing_is_recorded(
    cli: Approvers,
) -> None:
    asked = cli.start("drop", "drop-1")
    # No terminal to ask at: refused, and told how to confirm.
    result = cli.decide("approve", asked)
    assert result.exit_code == 1
    assert "asks for a confirmation step" in result.output and "--yes" in result.output
    assert cli.interrupt(asked).status == "pending"
    # A rejection lets nothing run: no step.
    other = cli.start("drop", "drop-2")
    assert cli.decide("reject", other, "--reason", "no").exit_code == 0
    result = cli.decide("approve", asked, "--yes")
    assert result.exit_code == 0, result.output
    assert cli.values("drop-1")["refunded"] is True


def test_the_confirmation_is_asked_at_a_terminal(
    cli: Approvers, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = cli.start("drop", "drop-3")
    monkeypatch.setattr(_decide, "_at_a_terminal", lambda: True)
    declined = CliRunner().invoke(cli_main, ["approve", asked, "--app", APP], input="n\n")
    assert declined.exit_code == 1 and "Not confirmed" in declined.output
    assert "Drop the orders table?" in declined.output
    assert cli.interrupt(asked).status == "pending"
    confirmed = CliRunner().invoke(cli_main, ["approve", asked, "--app", APP], input="y\n")
    assert confirmed.exit_code == 0, confirmed.output
    assert cli.values("drop-3")["refunded"] is True
