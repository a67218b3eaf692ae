"""Every script in examples/ runs as a user runs it: a process of its own, offline, on a real file.

Each test reads what the example printed (and what its tools left behind) and checks the
behaviour the example is there to show. The environment is scrubbed of ``OPENAI_*`` and
``INTERLOCK_MODEL`` so that the examples use their scripted models; one test per agent example
sets ``OPENAI_BASE_URL`` to show that it then talks to that endpoint, and each agent example runs
to the end on each provider named by ``INTERLOCK_MODEL``, against llmock.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import pytest
from llmock.pytest_plugin import LLMock
from llmock.scenarios import Reply
from llmock.scenarios import ToolCall as ScriptedCall

from interlock import SqliteStore

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
AGENT_EXAMPLES = ("shell_approval.py", "budget_supervisor.py", "order_approval.py")
RUN_HERE = {"approval.py", "effects.py", *AGENT_EXAMPLES}


def offline() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("OPENAI_") and k != "INTERLOCK_MODEL"
    }


def example(
    name: str, *args: str, cwd: Path, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=env if env is not None else offline(),
    )


# The providers INTERLOCK_MODEL names in the llmock runs, with the path each one's SDK posts to.
PROVIDERS = (
    pytest.param("openai:gpt-4o-mini", "/v1/chat/completions", id="openai"),
    pytest.param("anthropic:claude-sonnet-4-5", "/anthropic/v1/messages", id="anthropic"),
    pytest.param(
        "gemini:gemini-2.5-flash",
        "/gemini/v1beta/models/gemini-2.5-flash:generateContent",
        id="gemini",
    ),
)


def on_llmock(llmock: LLMock, spec: str) -> dict[str, str]:
    """The offline environment with ``INTERLOCK_MODEL=spec``, every provider's SDK at llmock."""
    # The SDKs find llmock through their own variables (OPENAI_BASE_URL, ANTHROPIC_BASE_URL,
    # GOOGLE_GEMINI_BASE_URL, and dummy keys), as they would find the provider.
    return {**offline(), **llmock.env(), "INTERLOCK_MODEL": spec}


def asked(llmock: LLMock, spec: str, path: str, replies: int) -> list[dict[str, Any]]:
    """The bodies llmock was sent, after checking each scripted reply was asked for, by ``spec``."""
    sent = [r for r in llmock.requests if r.method == "POST"]
    assert [r.path for r in sent] == [path] * replies
    if not spec.startswith("gemini:"):  # Gemini names the model in the path
        assert {r.body["model"] for r in sent} == {spec.rsplit(":", 1)[1]}
    return [r.body for r in sent]


def decisions(db: Path) -> list[tuple[str | None, object]]:
    """``(actor, answer)`` of every decision in the file's audit log, oldest first."""

    async def read() -> list[tuple[str | None, object]]:
        async with SqliteStore(db) as store:
            log = await store.audit_log()
        return [(e.actor, json.loads(e.data)["answer"]) for e in log if e.kind == "decision"]

    return anyio.run(read)


def test_every_example_is_run_here() -> None:
    found = {p.name for p in EXAMPLES.glob("*.py")}
    assert found == RUN_HERE, f"examples without a test here: {sorted(found - RUN_HERE)}"


# -- the graph examples ---------------------------------------------------------------------------


def test_approval_example(tmp_path: Path) -> None:
    out = example("approval.py", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "waiting: Refund ¥5000 to ada?" in out.stdout
    assert "done: ['reviewed: approved', 'paid ¥5000 to ada']" in out.stdout
    assert (tmp_path / "approval-example.db").exists()


def test_effects_example(tmp_path: Path) -> None:
    out = example("effects.py", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "bank paid: [5000]" in out.stdout  # once, though the first call "failed"
    assert "intact" in out.stdout


# -- shell_approval.py ----------------------------------------------------------------------------


def test_shell_approval_auto_runs_the_approved_echo_and_never_the_rejected_rm(
    tmp_path: Path,
) -> None:
    db, log = tmp_path / "shell.db", tmp_path / "commands.log"
    out = example("shell_approval.py", "--db", str(db), "--auto", "--log", str(log), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "model: offline" in out.stdout
    check_the_walkthrough(out, db, log)


def check_the_walkthrough(out: subprocess.CompletedProcess[str], db: Path, log: Path) -> None:
    """What ``--auto`` leaves behind, whichever model drives the agent."""
    text = out.stdout
    # echo: asked, approved, really run.
    assert "? Allow ops to call execute(" in text and "(rule: every command)" in text
    assert "execute -> ok: hello" in text
    # read_file: allowed, no question; it read the notes the walkthrough wrote.
    assert "read_file -> ok: Old build output lives in /tmp/x" in text
    # rm -rf /tmp/x: asked under the destructive rule, rejected with a reason, apologised for.
    assert "(rule: destructive)" in text
    assert "execute -> rejected: The backup of /tmp/x has not finished; keep it." in text
    assert "Sorry, I did not run `rm -rf /tmp/x`" in text
    # rm -rf /: refused by the policy without a question.
    assert "execute -> denied: Wiping the filesystem is never allowed." in text
    assert text.count("? Allow ops") == 2
    # Each answer went through a new Runner; the tool ran the echo, and nothing else.
    assert text.count("answering through a new Runner") == 2
    assert log.read_text().splitlines() == ["ran: echo hello"]
    assert decisions(db) == [
        ("operator", {"action": "approve"}),
        (
            "operator",
            {"action": "reject", "message": "The backup of /tmp/x has not finished; keep it."},
        ),
    ]


def shell_replies(notes: Path) -> tuple[Reply, ...]:
    """The model's replies to the walkthrough's four requests: a tool call, then an answer, each."""

    def calls(tool: str, **arguments: str) -> Reply:
        return Reply(tool_calls=(ScriptedCall(tool, arguments),))

    return (
        calls("execute", command="echo hello"),
        Reply(text="It printed hello."),
        calls("read_file", path=str(notes)),
        Reply(text="The old build output is in /tmp/x."),
        calls("execute", command="rm -rf /tmp/x"),
        Reply(text="Sorry, I did not run `rm -rf /tmp/x`: the backup is not done."),
        calls("execute", command="rm -rf /"),
        Reply(text="That is never allowed."),
    )


@pytest.mark.slow  # some 4 seconds each: eight phases, each importing the provider's SDK
@pytest.mark.parametrize(("spec", "path"), PROVIDERS)
def test_shell_approval_runs_on_the_model_interlock_model_names(
    tmp_path: Path, llmock: LLMock, spec: str, path: str
) -> None:
    db, log = tmp_path / "shell.db", tmp_path / "commands.log"
    replies = shell_replies(tmp_path / "notes.txt")
    llmock.add(*replies)
    args = ["--db", str(db), "--auto", "--log", str(log)]
    out = example("shell_approval.py", *args, cwd=tmp_path, env=on_llmock(llmock, spec))
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"model: {spec}" in out.stdout
    check_the_walkthrough(out, db, log)
    sent = asked(llmock, spec, path, len(replies))
    # The model reads the person's reason as the rejected call's result, and only then.
    reason = "The backup of /tmp/x has not finished; keep it."
    assert [reason in json.dumps(body) for body in sent] == [False] * 5 + [True] * 3


def test_shell_approval_asks_and_takes_an_edit_and_a_reason(tmp_path: Path) -> None:
    db, log = tmp_path / "shell.db", tmp_path / "commands.log"
    answers = "e\necho edited by a person\nn\nnot before the backup\n"
    out = example(
        "shell_approval.py", "--db", str(db), "--log", str(log), cwd=tmp_path, stdin=answers
    )
    assert out.returncode == 0, out.stderr
    assert "execute -> ok: edited by a person" in out.stdout
    assert "Sorry, I did not run `rm -rf /tmp/x`: not before the backup." in out.stdout
    assert log.read_text().splitlines() == ["ran: echo edited by a person"]


def test_shell_approval_end_of_input_at_a_question_stops_cleanly(tmp_path: Path) -> None:
    db, log = tmp_path / "shell.db", tmp_path / "commands.log"
    out = example("shell_approval.py", "--db", str(db), "--log", str(log), cwd=tmp_path)
    assert out.returncode == 1
    assert "keeps its state in" in out.stderr and "Traceback" not in out.stderr
    assert not log.exists()
    assert decisions(db) == []


# -- budget_supervisor.py -------------------------------------------------------------------------


def test_budget_supervisor_answers_from_the_top_and_does_not_plan_again(tmp_path: Path) -> None:
    out = example("budget_supervisor.py", "--db", str(tmp_path / "b.db"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    deep = (
        "address: node:budget/agent:pm/node:execute/agent:budget/node:tools/agent:allocator/"
        "tool:allocate_budget:"
    )
    assert text.count(deep) == 2  # one question per step, each with its full address
    assert text.count("agent: allocator, tool: allocate_budget, call: ") == 2
    assert text.count("approving from the top, through a new Runner") == 2
    assert "planner requests: 1 before the first question, 0 after" in text
    assert "booked: [('design', 300000), ('ads', 500000)]" in text  # each allocation once
    assert "done: The budget is set: Allocated ¥300000 to design. Allocated ¥500000 to ads." in text


# The replies of the models, in the order the agents ask: the pm hands over, the planner plans,
# the allocator books each step (a question each) and says so, and the pm reports.
BUDGET_REPLIES = (
    Reply(tool_calls=(ScriptedCall("transfer_to_budget", {}),)),
    Reply(
        tool_calls=(
            ScriptedCall(
                "plan", {"steps": ["Allocate 300000 to design", "Allocate 500000 to ads"]}
            ),
        )
    ),
    Reply(tool_calls=(ScriptedCall("allocate_budget", {"project": "design", "amount": 300000}),)),
    Reply(text="Allocated ¥300000 to design."),
    Reply(tool_calls=(ScriptedCall("allocate_budget", {"project": "ads", "amount": 500000}),)),
    Reply(text="Allocated ¥500000 to ads."),
    Reply(text="The budget is set: ¥300000 for design, ¥500000 for ads."),
)


@pytest.mark.slow  # some 4 seconds each: three phases, each importing the provider's SDK
@pytest.mark.parametrize(
    ("spec", "path"),
    [
        *PROVIDERS,
        pytest.param("langchain:openai:gpt-4o-mini", "/v1/chat/completions", id="langchain"),
    ],
)
def test_budget_supervisor_runs_on_the_model_interlock_model_names(
    tmp_path: Path, llmock: LLMock, spec: str, path: str
) -> None:
    llmock.add(*BUDGET_REPLIES)
    db = tmp_path / "b.db"
    out = example(
        "budget_supervisor.py", "--db", str(db), cwd=tmp_path, env=on_llmock(llmock, spec)
    )
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout
    deep = (
        "address: node:budget/agent:pm/node:execute/agent:budget/node:tools/agent:allocator/"
        "tool:allocate_budget:"
    )
    assert text.count(deep) == 2
    assert text.count("approving from the top, through a new Runner") == 2
    assert "model requests in this phase: (not counted for a real model)" in text
    assert "booked: [('design', 300000), ('ads', 500000)]" in text
    assert "done: The budget is set: ¥300000 for design, ¥500000 for ads." in text
    assert decisions(db) == [("cfo", {"action": "approve"})] * 2
    asked(llmock, spec, path, len(BUDGET_REPLIES))


# -- order_approval.py ----------------------------------------------------------------------------


def test_order_approval_two_sign_offs_an_edit_and_its_audited_diff(tmp_path: Path) -> None:
    db = tmp_path / "o.db"
    out = example("order_approval.py", "--db", str(db), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    check_the_orders(out, db)


def check_the_orders(out: subprocess.CompletedProcess[str], db: Path) -> None:
    """What the two orders leave behind, whichever model drives the agents."""
    text = out.stdout
    assert text.count("needs the 'manager' sign-off") == 1
    assert text.count("needs the 'finance' sign-off") == 1  # the small order needed neither
    assert "refused: " in text and "2000000 is greater than the maximum of 1000000" in text
    diff = '[{"op": "replace", "path": "/amount", "before": 80000, "after": 60000}]'
    assert f'"diff": {diff}' in text  # the decision's details
    assert f"diff: {diff}" in text  # its audit entry
    assert "reason: the negotiated price" in text
    assert "payments: [('PO-1001', 60000), ('PO-1002', 4500)]" in text  # the edited amount
    assert decisions(db) == [
        ("manager", {"action": "edit", "arguments": {"item": "8 laptops", "amount": 60000}}),
        ("finance", {"action": "approve"}),
    ]


# The replies of the models, in the order the agents ask: for each order, sales places it and
# reports it, then finance pays it and reports that. The big order's amount is asked for as the
# user gave it; the manager's edit lowers it before the tool runs, and finance pays the edited one.
ORDER_REPLIES = (
    Reply(tool_calls=(ScriptedCall("place_order", {"item": "8 laptops", "amount": 80000}),)),
    Reply(text="Order PO-1001 placed: 8 laptops for ¥60000."),
    Reply(tool_calls=(ScriptedCall("pay_supplier", {"order_id": "PO-1001", "amount": 60000}),)),
    Reply(text="Paid ¥60000 for PO-1001."),
    Reply(tool_calls=(ScriptedCall("place_order", {"item": "3 keyboards", "amount": 4500}),)),
    Reply(text="Order PO-1002 placed: 3 keyboards for ¥4500."),
    Reply(tool_calls=(ScriptedCall("pay_supplier", {"order_id": "PO-1002", "amount": 4500}),)),
    Reply(text="Paid ¥4500 for PO-1002."),
)


@pytest.mark.slow  # some 4 seconds each: six phases, each importing the provider's SDK
@pytest.mark.parametrize(("spec", "path"), PROVIDERS)
def test_order_approval_runs_on_the_model_interlock_model_names(
    tmp_path: Path, llmock: LLMock, spec: str, path: str
) -> None:
    llmock.add(*ORDER_REPLIES)
    db = tmp_path / "o.db"
    out = example("order_approval.py", "--db", str(db), cwd=tmp_path, env=on_llmock(llmock, spec))
    assert out.returncode == 0, out.stdout + out.stderr
    check_the_orders(out, db)
    assert "finance: Paid ¥60000 for PO-1001." in out.stdout
    asked(llmock, spec, path, len(ORDER_REPLIES))


# -- the real-model path --------------------------------------------------------------------------


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A local port that refuses connections: bound, never listening, so nobody else takes it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


@pytest.mark.parametrize("name", AGENT_EXAMPLES)
def test_openai_base_url_selects_the_real_model(
    tmp_path: Path, closed_port: int, name: str
) -> None:
    url = f"http://127.0.0.1:{closed_port}/v1"
    env = {**offline(), "OPENAI_BASE_URL": url, "OPENAI_MODEL": "tiny-local"}
    unattended = ["--auto"] if name == "shell_approval.py" else []
    out = example(name, "--db", str(tmp_path / "x.db"), *unattended, cwd=tmp_path, env=env)
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"error: could not reach model 'tiny-local' at {url}" in out.stderr
    assert "Traceback" not in out.stderr


def fake_openai() -> ModuleType:
    """The fake OpenAI endpoint of the agents' tests (tests/agents/_fake_openai.py)."""
    name = "_fake_openai"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, ROOT / "tests" / "agents" / f"{name}.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def test_shell_approval_with_a_real_model_endpoint(tmp_path: Path) -> None:
    fake = fake_openai()

    def calls(id: str, tool: str, **arguments: str) -> object:
        return fake.completion(tool_calls=[fake.tool_call(id, tool, json.dumps(arguments))])

    log = tmp_path / "commands.log"
    with fake.FakeOpenAI() as endpoint:
        endpoint.script(
            calls("c1", "execute", command="echo hello"),
            fake.completion("It printed hello."),
            calls("c2", "read_file", path=str(tmp_path / "notes.txt")),
            fake.completion("The old build output is in /tmp/x."),
            calls("c3", "execute", command="rm -rf /tmp/x"),
            fake.completion("Sorry: I left /tmp/x alone."),
            calls("c4", "execute", command="rm -rf /"),
            fake.completion("That is never allowed."),
        )
        env = {**offline(), "OPENAI_BASE_URL": endpoint.base_url}
        args = ["--db", str(tmp_path / "s.db"), "--auto", "--log", str(log)]
        out = example("shell_approval.py", *args, cwd=tmp_path, env=env)
        sent = [r.body for r in endpoint.requests]
    assert out.returncode == 0, out.stdout + out.stderr
    assert "model: openai:gpt-4o-mini" in out.stdout
    assert "execute -> ok: hello" in out.stdout and "ops: Sorry: I left /tmp/x alone." in out.stdout
    assert log.read_text().splitlines() == ["ran: echo hello"]
    assert len(sent) == 8
    assert all(b["model"] == "gpt-4o-mini" for b in sent)
    assert {t["function"]["name"] for t in sent[0]["tools"]} == {"execute", "read_file"}
    assert sent[0]["messages"][0]["role"] == "system"
    # The model reads the person's reason as the rejected call's result.
    rejected = sent[5]["messages"][-1]
    assert rejected == {
        "role": "tool",
        "tool_call_id": "c3",
        "content": "The backup of /tmp/x has not finished; keep it.",
    }


@pytest.mark.parametrize("name", AGENT_EXAMPLES)
def test_a_bad_interlock_model_is_refused(tmp_path: Path, name: str) -> None:
    env = {**offline(), "INTERLOCK_MODEL": "gpt-4o"}
    unattended = ["--auto"] if name == "shell_approval.py" else []
    out = example(name, "--db", str(tmp_path / "x.db"), *unattended, cwd=tmp_path, env=env)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "error: INTERLOCK_MODEL='gpt-4o' names no provider" in out.stderr
    assert "anthropic:claude-sonnet-4-5" in out.stderr and "Traceback" not in out.stderr
