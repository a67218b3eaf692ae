"""Approval policies: rules per tool, predicates, callables, defaults, and failing closed."""

from __future__ import annotations

from typing import Any

import pytest

from interlock.agents import ApprovalPolicy, Rule, Verdict, allow, deny, matches, require_approval
from interlock.agents._policy import strictest

SHELL = ApprovalPolicy(
    {
        "read_file": "allow",
        "execute": [
            deny("Never the root.", when=matches("command", r"rm\s+-rf\s+/$")),
            require_approval(when=matches("command", r"\brm\b|\bsudo\b"), name="destructive"),
            allow(),
        ],
        "delete": deny(),
    }
)


@pytest.mark.parametrize(
    ("tool", "arguments", "action", "rule"),
    [
        ("read_file", {"path": "/etc/hosts"}, "allow", "read_file: allow"),
        ("execute", {"command": "ls -l"}, "allow", "execute: allow"),
        ("execute", {"command": "rm -rf /tmp/x"}, "require_approval", "destructive"),
        ("execute", {"command": "sudo reboot"}, "require_approval", "destructive"),
        (
            "execute",
            {"command": "rm -rf /"},
            "deny",
            r"execute: deny when matches('command', 'rm\\s+-rf\\s+/$')",
        ),
        ("delete", {}, "deny", "delete: deny"),
        ("unlisted", {}, "require_approval", "default: require_approval"),
    ],
)
def test_the_first_rule_that_holds_decides(
    tool: str, arguments: dict[str, Any], action: str, rule: str
) -> None:
    verdict = SHELL.verdict(tool, arguments)
    assert (verdict.action, verdict.rule) == (action, rule)


def test_deny_carries_its_message_for_the_model() -> None:
    assert SHELL.verdict("execute", {"command": "rm -rf /"}).message == "Never the root."
    assert SHELL.verdict("delete", {}).message == "This action is not allowed by policy."


def test_a_star_rule_and_a_default_cover_unlisted_tools() -> None:
    assert ApprovalPolicy({"*": "allow"}).verdict("x", {}).action == "allow"
    assert ApprovalPolicy(default="deny").verdict("x", {}).action == "deny"
    assert ApprovalPolicy({"a": "allow"}, default=allow()).verdict("b", {}).action == "allow"


def test_matches_reads_non_string_arguments_as_json_and_skips_absent_ones() -> None:
    rule = matches("paths", r'"/etc')
    assert rule({"paths": ["/tmp", "/etc/passwd"]}) is True
    assert rule({"other": 1}) is False
    assert repr(rule) == "matches('paths', '\"/etc')"


def test_a_callable_rule_decides_anything_dynamic() -> None:
    def by_amount(arguments: dict[str, Any]) -> str | Rule | None:
        amount = arguments["amount"]
        if amount > 1000:
            return deny(f"{amount} is over the limit")
        if amount > 100:
            return "require_approval"
        return None  # the default

    policy = ApprovalPolicy({"pay": by_amount}, default="allow")
    assert policy.verdict("pay", {"amount": 5}).action == "allow"
    assert policy.verdict("pay", {"amount": 500}).action == "require_approval"
    assert policy.verdict("pay", {"amount": 5000}) == Verdict(
        action="deny", rule="pay: deny", message="5000 is over the limit"
    )


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        (lambda a: 1 / 0, "raised ZeroDivisionError"),
        (lambda a: "maybe", "which is no action"),
        ([allow(when=lambda a: a["missing"])], "raised KeyError"),
        ([allow(when=lambda a: "yes")], "not a bool"),
    ],
)
def test_a_rule_that_fails_fails_closed(spec: Any, why: str) -> None:
    verdict = ApprovalPolicy({"t": spec}, default="allow").verdict("t", {"x": 1})
    assert verdict.action == "require_approval"
    assert "fail closed" in verdict.rule and why in verdict.rule


@pytest.mark.parametrize(
    ("rules", "error"),
    [
        ({"t": "perhaps"}, ValueError),
        ({"t": 3}, TypeError),
        ({"t": []}, ValueError),
        ({"": "allow"}, ValueError),
        ([("t", "allow")], TypeError),
    ],
)
def test_malformed_policies_are_refused_when_built(rules: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        ApprovalPolicy(rules)


def test_rules_check_their_parts() -> None:
    with pytest.raises(ValueError, match="action"):
        Rule("approve")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Rule("allow", when=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="bad pattern"):
        matches("x", "(")


def test_the_strictest_verdict_wins() -> None:
    a, r, d = (Verdict(action=x, rule=x) for x in ("allow", "require_approval", "deny"))  # type: ignore[arg-type]
    assert strictest([a, r]) is r and strictest([r, d, a]) is d and strictest([a]) is a
