"""The Slack channel's configuration: the constructor, the TOML file, ``interlock serve --slack``,
and the messages and modals it builds (pure functions of the question)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from interlock.cli import cli
from interlock.server import Slack, SlackConfigError
from interlock.server._slack_blocks import edited_arguments, question_message
from interlock.server._views import InterruptView

ENV = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "abc123"}


def test_importing_the_server_does_not_import_slack_sdk() -> None:
    code = (
        "import sys, interlock, interlock.server; "
        "assert 'slack_sdk' not in sys.modules and 'aiohttp' not in sys.modules; "
        "from interlock.server import Slack; assert 'slack_sdk' in sys.modules; "
        "print(Slack.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "interlock.server"


def test_routes_send_a_tool_to_its_channel_or_person_else_the_default() -> None:
    slack = Slack(
        token="xoxb-1",
        signing_secret="s",
        channel="C0DEFAULT",
        routes={"refund*": "C0FINANCE", "deploy": "U0OPS"},
    )
    assert slack.destination("refund_order") == "C0FINANCE"
    assert slack.destination("deploy") == "U0OPS"
    assert slack.destination("deploy_all") == "C0DEFAULT"
    assert slack.destination(None) == "C0DEFAULT"
    assert Slack(token="t", signing_secret="s", routes={"x": "C1"}).destination("y") is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"token": ""}, "bot token"),
        ({"signing_secret": " "}, "signing secret"),
        ({"channel": None}, "nowhere to post"),
        ({"channel": "#approvals"}, "channel id"),
        ({"routes": {"refund*": "finance team"}}, "the route of 'refund*'"),
        ({"base_url": "slack.com/api"}, "http(s) URL"),
        ({"max_attempts": 0}, "max_attempts must be 1 or more"),
    ],
)
def test_a_constructor_that_cannot_work_says_why(options: dict[str, Any], message: str) -> None:
    given: dict[str, Any] = {"token": "xoxb-1", "signing_secret": "s", "channel": "C1", **options}
    with pytest.raises(ValueError, match=re.escape(message)):
        Slack(**given)


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "slack.toml"
    path.write_text(text)
    return path


def test_the_file_names_the_variables_that_hold_the_secrets(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        'channel = "C0APPROVALS"\ntoken_env = "BOT"\nmax_attempts = 3\n'
        '[routes]\n"refund*" = "C0FINANCE"\n',
    )
    slack = Slack.from_file(path, environ={"BOT": "xoxb-2", "SLACK_SIGNING_SECRET": "abc"})
    assert slack.channel == "C0APPROVALS" and slack.routes == (("refund*", "C0FINANCE"),)
    assert slack.retry.max_attempts == 3
    assert "xoxb" not in repr(slack)


@pytest.mark.parametrize(
    ("text", "environ", "message"),
    [
        ('channel = "C1"\nchanel = "C2"\n', ENV, "unknown key 'chanel'"),
        ('channel = "C1"\ntoken = "xoxb-1"\n', ENV, "token holds a secret"),
        ('channel = "C1"\nsigning_secret = "x"\n', ENV, "signing_secret holds a secret"),
        ('channel = "C1"\n', {"SLACK_BOT_TOKEN": "x"}, "SLACK_SIGNING_SECRET"),
        ('channel = "C1"\ntoken_env = "MY_TOKEN"\n', ENV, "MY_TOKEN (token_env) is not set"),
        ('channel = "C1"\nroutes = "C2"\n', ENV, "routes must be a table"),
        ('channel = "C1"\ntimeout = "10"\n', ENV, "timeout has the wrong type"),
        ('channel = "C1"\nmax_attempts = true\n', ENV, "max_attempts has the wrong type"),
        ("channel = ", ENV, "not valid TOML"),
        ("", ENV, "nowhere to post"),
    ],
)
def test_a_wrong_file_is_refused_naming_what_is_wrong(
    tmp_path: Path, text: str, environ: dict[str, str], message: str
) -> None:
    with pytest.raises(SlackConfigError) as caught:
        Slack.from_file(_file(tmp_path, text), environ=environ)
    assert message in str(caught.value)
    assert "xoxb-1" not in str(caught.value)


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SlackConfigError, match="cannot read"):
        Slack.from_file(tmp_path / "nope.toml", environ=ENV)


def test_serve_refuses_a_wrong_slack_file_naming_the_key(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(CliRunner().invoke(cli, ["token", "new", "ana"]).stdout)
    path = _file(tmp_path, 'channel = "C1"\nchanels = ["C2"]\n')
    args = [
        "serve",
        "--app",
        "_serving:env_order_app",
        "--tokens",
        str(tokens),
        "--slack",
        str(path),
    ]
    result = CliRunner().invoke(cli, args, env=ENV)
    output = " ".join(result.output.split())
    assert result.exit_code == 2 and "unknown key 'chanels'" in output and "--slack" in output


def test_serve_takes_a_good_slack_file_then_opens_the_app(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(CliRunner().invoke(cli, ["token", "new", "ana"]).stdout)
    path = _file(tmp_path, 'channel = "C1"\n')
    args = ["serve", "--app", "_serving:no_such_app", "--tokens", str(tokens), "--slack", str(path)]
    result = CliRunner().invoke(cli, args, env=ENV)
    assert result.exit_code != 0 and "no_such_app" in result.output
    assert "--slack" not in result.output


# --- what people see -------------------------------------------------------------------------


def _view(**info: Any) -> InterruptView:
    base = {
        "type": "tool_approval",
        "question": "Allow banker to call transfer?",
        "agent": "banker",
        "tool": "transfer",
        "arguments": {"account": "acct-1", "amount": 120},
        "rule": "payments",
        "schema": {
            "type": "object",
            "properties": {"account": {"type": "string"}, "amount": {"type": "integer"}},
            "required": ["account", "amount"],
        },
    }
    return InterruptView(
        id="i-1",
        app="bank",
        thread="t-1",
        key=None,
        kind="dynamic",
        status="pending",
        address="agent",
        tool="transfer",
        summary="Allow banker to call transfer?",
        info={**base, **info},
        answer_schema=None,
        created_at=0.0,
        deadline=1_800_000_000.0,
        payload_hash="h",
    )


def test_long_arguments_are_cut_with_a_link_to_the_inbox() -> None:
    view = _view(arguments={"account": "acct-1", "memo": "x" * 5000})
    message = question_message(view, link="https://a.example.com/inbox#/interrupts/i-1")
    text = " ".join(
        b["text"]["text"] for b in message["blocks"] if "text" in b and "text" in b["text"]
    )
    assert "Truncated" in text and "See the full arguments in the inbox" in text
    assert all(len(b["text"]["text"]) <= 3000 for b in message["blocks"] if "text" in b)
    assert "2027-01-15 08:00:00 UTC" in str(message["blocks"])  # the deadline
    without = question_message(view, link=None)
    assert "See the full" not in str(without["blocks"])


def test_mrkdwn_in_a_question_is_shown_literally() -> None:
    view = _view(arguments={"account": "<!channel> & <https://evil.example|click>"})
    message = question_message(view, link=None)
    assert "<!channel>" not in str(message["blocks"]) and "&lt;!channel&gt;" in str(message)


def test_a_question_that_is_not_a_tool_call_gets_approve_and_reject_only() -> None:
    view = _view(type="approval")
    message = question_message(view, link=None)
    (actions,) = [b for b in message["blocks"] if b["type"] == "actions"]
    assert [e["action_id"] for e in actions["elements"]] == [
        "interlock.approve",
        "interlock.reject",
    ]
    done = question_message(view, link=None, outcome="Approved by ana")
    assert not [b for b in done["blocks"] if b["type"] == "actions"]


def test_an_edit_keeps_what_the_modal_does_not_show_and_checks_the_schema() -> None:
    view = _view()
    values = {
        "account": {"value": {"value": "acct-2"}},
        "amount": {"value": {"value": "7"}},
    }
    arguments, errors = edited_arguments(view, values)
    assert errors == {} and arguments == {"account": "acct-2", "amount": 7}
    missing = {"account": {"value": {"value": "acct-2"}}, "amount": {"value": {"value": None}}}
    arguments, errors = edited_arguments(view, missing)
    assert arguments is None and "amount" in errors
