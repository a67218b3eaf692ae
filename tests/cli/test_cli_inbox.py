"""`interlock inbox` and `interlock show`: the questions, read from a store."""

from __future__ import annotations

import json
import re
from pathlib import Path

import _cli_app
import anyio
import pytest
from _cli_run import Approvers

INBOX_FIELDS = {
    "id",
    "thread",
    "key",
    "kind",
    "status",
    "tool",
    "address",
    "info",
    "schema",
    "created_at",
    "deadline",
    "approvals",
    "approved_by",
    "payload_hash",
}


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Approvers:
    return Approvers(tmp_path, monkeypatch)


@pytest.fixture
def three(cli: Approvers) -> dict[str, str]:
    """One question of each kind, oldest first: ``{kind: id}``."""
    return {
        "refund": cli.start("refund", "order-1", deadline_in=3600),
        "plan": cli.start("plan", "signup-7"),
        "ops": cli.start("ops", "ticket-3", messages=["ls -l /srv"]),
    }


def rows(output: str) -> dict[str, str]:
    """The inbox table's rows by interrupt id."""
    found = {}
    for line in output.splitlines():
        m = re.match(r"\s*([0-9a-f]{20})\s", line)
        if m:
            found[m[1]] = line
    return found


def test_inbox_lists_every_waiting_question_from_the_store_alone(
    cli: Approvers, three: dict[str, str]
) -> None:
    result = cli.read("inbox")
    assert result.exit_code == 0, result.output
    table = rows(result.stdout)
    assert list(table) == [three["refund"], three["plan"], three["ops"]]  # oldest first
    refund, plan, ops = (table[three[k]] for k in ("refund", "plan", "ops"))
    assert "order-1" in refund and "approval" in refund and _cli_app.REFUND_QUESTION in refund
    assert re.search(r"in 59m|in 1h", refund)  # the deadline's countdown
    assert "just now" in refund or "s ago" in refund  # its age
    assert "signup-7" in plan and "key:plan" in plan and "Which plan" in plan
    assert "ticket-3" in ops and "tool:execute" in ops and "ls -l /srv" in ops
    assert f"interlock show {three['refund']}" in result.stdout


def test_inbox_shows_a_quorums_progress(cli: Approvers, three: dict[str, str]) -> None:
    wire = cli.start("quorum", "wire-1")
    assert re.search(
        r"Wire \$2M to the supplier\?.*\s0/2\s*$", rows(cli.read("inbox").stdout)[wire]
    )
    header = cli.read("inbox", "--thread", "order-1").stdout.splitlines()[0]
    assert "deadline" in header and "approvals" not in header  # no column without a quorum

    assert cli.decide("approve", wire, "--actor", "ada").exit_code == 0
    for listing in (cli.read("inbox").stdout, cli.decide("inbox").stdout):  # with or without app
        assert re.search(r"\s1/2 \(ada\)\s*$", rows(listing)[wire])
        assert rows(listing)[three["refund"]].rstrip().endswith("-")  # needs one answer
    (shown,) = cli.json("inbox", "--thread", "wire-1")
    assert (shown["approvals"], shown["approved_by"]) == (2, ["ada"])
    assert "approvals     1 of 2 given (ada)" in cli.read("show", wire).stdout


def test_inbox_json_is_exact_and_machine_readable(cli: Approvers, three: dict[str, str]) -> None:
    listed = cli.json("inbox")
    assert [i["id"] for i in listed] == list(three.values())
    assert all(set(i) == INBOX_FIELDS for i in listed)
    refund, plan, ops = listed
    assert refund["info"] == {
        "type": "approval",
        "question": _cli_app.REFUND_QUESTION,
        "details": None,
    }
    assert refund["tool"] is None and refund["key"] is None
    assert isinstance(refund["created_at"], float) and refund["deadline"] > refund["created_at"]
    assert plan["key"] == "plan" and plan["schema"] == _cli_app.PLAN_SCHEMA
    assert plan["deadline"] is None and plan["address"] == "node:plan"
    assert ops["tool"] == "execute" and ops["info"]["arguments"] == {"command": "ls -l /srv"}
    assert ops["address"].endswith("tool:execute:call_ops_0_0")

    # Exact: the same numbers and hash the app itself reports.
    app = _cli_app.make_app()

    async def from_app() -> list[tuple[float, str]]:
        try:
            return [(i.created_at, app.payload_hash(i)) for i in await app.inbox()]
        finally:
            await app.store.close()

    assert anyio.run(from_app) == [(i["created_at"], i["payload_hash"]) for i in listed]


@pytest.mark.parametrize(
    ("filters", "kinds"),
    [
        (["--thread", "signup-7"], ["plan"]),
        (["--tool", "execute"], ["ops"]),
        (["--key", "plan"], ["plan"]),
        (["--older-than", "1h"], []),
        (["--older-than", "0"], ["refund", "plan", "ops"]),
        (["--thread", "ticket-3", "--tool", "execute"], ["ops"]),
        (["--thread", "order-1", "--tool", "execute"], []),
    ],
)
def test_inbox_filters(
    cli: Approvers, three: dict[str, str], filters: list[str], kinds: list[str]
) -> None:
    assert [i["id"] for i in cli.json("inbox", *filters)] == [three[k] for k in kinds]
    if not kinds:
        shown = cli.read("inbox", *filters)
        assert shown.exit_code == 0
        assert "No questions are waiting that match these filters." in shown.stdout


def test_inbox_pages_and_says_how_to_get_the_next_page(
    cli: Approvers, three: dict[str, str]
) -> None:
    first = cli.read("inbox", "--limit", "2")
    assert list(rows(first.stdout)) == [three["refund"], three["plan"]]
    assert f"Next page: interlock inbox --limit 2 --after {three['plan']}" in first.stdout

    second = cli.read("inbox", "--limit", "2", "--after", three["plan"])
    assert list(rows(second.stdout)) == [three["ops"]]
    assert "Next page" not in second.stdout

    paged = cli.json("inbox", "--limit", "1") + cli.json("inbox", "--after", three["refund"])
    assert [i["id"] for i in paged] == list(three.values())


def test_an_empty_inbox_says_so(cli: Approvers) -> None:
    cli.start("refund", "t")
    cli.decide("approve", cli.json("inbox")[0]["id"])
    result = cli.read("inbox")
    assert result.exit_code == 0
    assert "No questions are waiting." in result.stdout
    assert cli.json("inbox") == []


def test_show_a_tool_call_in_full(cli: Approvers, three: dict[str, str]) -> None:
    result = cli.read("show", three["ops"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "ticket-3 (interrupted)" in out  # the thread's status
    assert "subgraph:ops/node:tools/agent:ops/tool:execute:call_ops_0_0" in out
    assert '{\n  "command": "ls -l /srv"\n}' in out  # the arguments, as pretty JSON
    assert "rule: execute: require_approval" in out
    assert "The tool's argument schema" in out and '"required": [\n    "command"\n  ]' in out
    hashed = cli.json("inbox", "--tool", "execute")[0]["payload_hash"]
    assert f"payload hash  {hashed}" in out
    assert "interrupt" in out and "asked at subgraph:ops" in out  # its audit entry
    assert f"interlock approve {three['ops']}" in out
    assert f"interlock edit {three['ops']} --arguments" in out


def test_show_a_generic_question_gives_its_schema(cli: Approvers, three: dict[str, str]) -> None:
    out = cli.read("show", three["plan"]).stdout
    assert "Answer schema" in out and '"enum": [\n        "basic",\n        "pro"' in out
    assert "key           plan" in out
    assert f"interlock answer {three['plan']} JSON" in out
    assert f"interlock approve {three['plan']}" not in out  # it does not take yes/no


def test_show_json_after_a_decision_names_who_decided(
    cli: Approvers, three: dict[str, str]
) -> None:
    decided = cli.decide("approve", three["refund"], "--actor", "ada", "--reason", "ok")
    assert decided.exit_code == 0, decided.output
    shown = cli.json("show", three["refund"])
    assert shown["status"] == "resolved" and shown["thread_status"] == "done"
    assert shown["decision"]["actor"] == "ada" and shown["decision"]["answer"] is True
    assert shown["decision"]["reason"] == "ok"
    assert [e["kind"] for e in shown["audit"]] == ["interrupt", "decision"]
    assert shown["audit"][1]["actor"] == "ada"
    human = cli.read("show", three["refund"]).stdout
    assert "ada decided" in human and "reason: ok" in human
    assert "Answer with" not in human


def test_show_an_unknown_id_exits_1(cli: Approvers, three: dict[str, str]) -> None:
    result = cli.read("show", "0123456789abcdef0123")
    assert result.exit_code == 1
    assert "no interrupt has the id '0123456789abcdef0123'" in result.output
    assert "interlock inbox" in result.output


def test_questions_holding_the_apps_types_need_the_app(cli: Approvers) -> None:
    cli.start("typed", "order-9")
    alone = cli.read("inbox")
    assert alone.exit_code == 1
    assert "cannot be read" in alone.output and "pass --app" in alone.output
    with_app = cli.decide("inbox", "--json")
    assert with_app.exit_code == 0, with_app.output
    (shown,) = json.loads(with_app.stdout)
    assert shown["info"]["details"] == {"number": 42, "total": 5000}


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["inbox"], "say where the threads are: pass --store URL"),
        (["inbox", "--store", "mysql://db/x"], "unsupported store URL 'mysql://db/x'"),
        (["inbox", "--store", "sqlite://host/x.db"], "no host between the slashes"),
        (["inbox", "--store", "sqlite:///a.db", "--older-than", "soon"], "not a duration"),
        (["inbox", "--store", "sqlite:///a.db", "--limit", "0"], "Invalid value for '--limit'"),
        (["show", "x", "--app", "nocolon"], "write it as module:attribute"),
        (["show", "x", "--app", "no_such_module_here:app"], "no module named"),
        (["show", "x", "--app", "_cli_app:missing"], "has no attribute 'missing'"),
        (["show", "x", "--app", "_cli_app:PLAN_SCHEMA"], "name an interlock App"),
    ],
)
def test_usage_errors_exit_2(cli: Approvers, args: list[str], said: str) -> None:
    result = cli.invoke(*args)
    assert result.exit_code == 2, result.output
    assert said in result.output


def test_a_store_file_that_does_not_exist_is_not_an_empty_inbox(cli: Approvers) -> None:
    result = cli.invoke("inbox", "--store", "sqlite:///typo.db")
    assert result.exit_code == 1
    assert f"no database at {cli.dir / 'typo.db'}" in result.output
    assert not (cli.dir / "typo.db").exists()


def test_at_80_columns_the_inbox_fits_and_keeps_the_questions_words_whole(
    cli: Approvers,
) -> None:
    command = "rm -rf /srv/old-backups/2024 --preserve-root --one-file-system --verbose"
    ops = cli.start("ops", "ticket-9", messages=[command])
    refund = cli.start("refund", "order-2")
    out = cli.invoke("inbox", "--store", cli.store_url, env={"COLUMNS": "80"}).stdout
    table = out.split("\n2 waiting.")[0].splitlines()
    assert max(len(line) for line in table) <= 80, out
    start, end = table[0].index("question"), table[0].index("age")
    questions = {ops: [], refund: []}
    for line in table[2:]:
        if m := re.match(r"\s*([0-9a-f]{20})\s", line):
            row = questions[m[1]]
        row.extend(line[start:end].split())
    for id, question in (
        (ops, f'Allow ops to call execute({{"command":"{command}"}})?'),
        (refund, _cli_app.REFUND_QUESTION),
    ):
        words = question.split()
        shown = questions[id]
        assert shown, out
        for word in shown:  # whole, or cut at its end where it is wider than the column
            assert word in words or (
                word.endswith("…") and any(w.startswith(word[:-1]) for w in words)
            ), (word, out)
    assert " ".join(questions[refund]) == _cli_app.REFUND_QUESTION  # short: all of it


def test_show_and_history_mark_an_edited_call_and_the_edit(cli: Approvers) -> None:
    asked = cli.start("ops", "ticket-5", messages=["rm -rf /srv"])
    edited = cli.decide("edit", asked, "--arguments", '{"command": "rm -rf /srv/tmp"}')
    assert edited.exit_code == 0, edited.output
    out = cli.read("show", asked).stdout
    assert "status        resolved (edited by " in out
    asked_for = out.index("Arguments as asked")
    ran_with = out.index("Edited arguments")
    assert asked_for < ran_with
    assert '"command": "rm -rf /srv"\n' in out[asked_for:ran_with]
    assert '"command": "rm -rf /srv/tmp"\n' in out[ran_with:]
    assert '/command: "rm -rf /srv" → "rm -rf /srv/tmp"' in out
    for listing in (out, cli.read("history", "ticket-5").stdout):  # the audit entries
        assert re.search(r'decision\s+\S+\s+edited the call: /command: "rm -rf /srv" →', listing)
    unedited = cli.start("ops", "ticket-6", messages=["ls"])
    assert cli.decide("approve", unedited).exit_code == 0
    plain = cli.read("show", unedited).stdout
    assert "edited" not in plain.lower() and "Arguments as asked" not in plain
