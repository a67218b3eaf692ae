"""Approval policies: which tool calls run, which wait for a person, which are refused.

A policy maps tool names to rules. A rule is an action (``"allow"``, ``"require_approval"``,
``"deny"``), optionally with a predicate on the call's arguments; a tool may have a list of
rules, and the first whose predicate holds decides. A callable rule decides anything dynamic.
A tool the policy does not list gets the policy's ``default`` (``"require_approval"``).

The policy fails closed: a predicate that raises, or a callable that returns something that is
not a rule, makes the call wait for approval, and the verdict says why.

A rule that requires approval may require a quorum: ``require_approval(approvals=2)`` makes
the call wait until two distinct people approved it (any rejection ends it at once).

Example::

    policy = ApprovalPolicy({
        "read_file": "allow",
        "execute": [
            deny("Never delete the root.", when=matches("command", r"rm\\s+-rf\\s+/$")),
            require_approval(when=matches("command", r"\\bsudo\\b"), approvals=2),
            require_approval(when=matches("command", r"\\brm\\b")),
            allow(),
        ],
    })
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias, get_args

import msgspec

from ..runtime import Authority, check_approvals

__all__ = [
    "Action",
    "ApprovalPolicy",
    "Rule",
    "Verdict",
    "allow",
    "deny",
    "matches",
    "require_approval",
]

Action = Literal["allow", "require_approval", "deny"]
"""What a rule does with a tool call."""

ACTIONS: Final = frozenset(get_args(Action))
_STRICTNESS: Final = {"allow": 0, "require_approval": 1, "deny": 2}

Predicate: TypeAlias = Callable[[dict[str, Any]], bool]
"""A test of a call's arguments."""

_DENIED: Final = "This action is not allowed by policy."


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule: an action, taken when ``when`` holds (always, if None).

    Build rules with `allow`, `require_approval` and `deny`.
    """

    action: Action
    when: Predicate | None = None
    message: str | None = None
    """For ``deny``: what the model is told. For ``require_approval``: the question shown."""
    name: str | None = None
    """How the verdict names the rule (else a description is made up)."""
    approvals: int = 1
    """For ``require_approval``: how many distinct people must approve the call."""
    authority: Authority | None = None
    """For ``require_approval``: who may approve it (see `interlock.Authority`)."""
    confirm: bool = False
    """For ``require_approval``: an approval takes an explicit confirmation step."""

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(
                f"a rule's action must be one of {sorted(ACTIONS)}, not {self.action!r}"
            )
        check_approvals(self.approvals)
        if self.approvals > 1 and self.action != "require_approval":
            raise ValueError(
                f"approvals={self.approvals} needs a require_approval rule, not {self.action!r}"
            )
        if self.authority is not None:
            if not isinstance(self.authority, Authority):
                raise TypeError(
                    f"a rule's authority must be an Authority, not {type(self.authority).__name__}"
                )
            if self.action != "require_approval":
                raise ValueError(f"authority= needs a require_approval rule, not {self.action!r}")
        if not isinstance(self.confirm, bool):
            raise TypeError(f"a rule's confirm must be True or False, not {self.confirm!r}")
        if self.confirm and self.action != "require_approval":
            raise ValueError(f"confirm=True needs a require_approval rule, not {self.action!r}")
        if self.when is not None and not callable(self.when):
            raise TypeError(f"a rule's when= must be callable, not {type(self.when).__name__}")
        if self.message is not None and not isinstance(self.message, str):
            raise TypeError("a rule's message must be a str")

    def describe(self, tool: str) -> str:
        """How a verdict names this rule."""
        if self.name:
            return self.name
        action = self.action if self.approvals < 2 else f"{self.action} by {self.approvals}"
        if self.when is None:
            return f"{tool}: {action}"
        return f"{tool}: {action} when {_describe(self.when)}"


def allow(when: Predicate | None = None, *, name: str | None = None) -> Rule:
    """A rule that lets the call run (when ``when`` holds)."""
    return Rule("allow", when, None, name)


def require_approval(
    when: Predicate | None = None,
    *,
    question: str | None = None,
    name: str | None = None,
    approvals: int = 1,
    authority: Authority | None = None,
    confirm: bool = False,
) -> Rule:
    """A rule that makes the call wait for a person (when ``when`` holds).

    With ``approvals=N`` (N > 1) the call waits for N distinct people to approve it (each
    decides with ``actor=``); the first rejection, or an answer in place of the tool, ends it
    at once. An edit makes a new call, asked again with the edited arguments and at least the
    same quorum: approvals of the old arguments do not count.

    ``authority`` says who may approve (`interlock.Authority`): ``require_approval(
    when=over_1000, authority=Authority(groups=("finance",)))``. It is stored with the
    question and checked by `App.decide` on every surface. An edit into arguments a rule
    with another authority covers is asked again under that authority.

    ``confirm=True`` makes approving the call a two-step act on every surface of the approval
    server (the web inbox, Slack, e-mail links, the CLI and the HTTP API, which refuses an
    approval sent without ``confirmed``): for calls that cannot be undone, such as
    ``require_approval(when=matches("command", r"\brm\b"), confirm=True)``.
    """
    return Rule("require_approval", when, question, name, approvals, authority, confirm)


def deny(message: str = _DENIED, *, when: Predicate | None = None, name: str | None = None) -> Rule:
    """A rule that refuses the call; the model is told ``message`` (when ``when`` holds)."""
    return Rule("deny", when, message, name)


class matches:
    """A predicate: the argument ``argument`` (as text) contains a match of ``pattern``.

    An absent argument does not match. The pattern is a Python regular expression
    (`re.search`); ``flags`` are `re` flags.
    """

    __slots__ = ("argument", "pattern")

    def __init__(self, argument: str, pattern: str, flags: int = 0) -> None:
        if not isinstance(argument, str) or not argument:
            raise ValueError("matches() needs the name of an argument")
        if not isinstance(pattern, str):
            raise TypeError(f"matches() needs a pattern str, not {type(pattern).__name__}")
        try:
            self.pattern = re.compile(pattern, flags)
        except re.error as exc:
            raise ValueError(f"matches({argument!r}, {pattern!r}): bad pattern: {exc}") from exc
        self.argument = argument

    def __call__(self, arguments: dict[str, Any]) -> bool:
        if self.argument not in arguments:
            return False
        value = arguments[self.argument]
        text = value if isinstance(value, str) else msgspec.json.encode(value).decode()
        return self.pattern.search(text) is not None

    def __repr__(self) -> str:
        return f"matches({self.argument!r}, {self.pattern.pattern!r})"


def _describe(fn: Callable[..., Any]) -> str:
    if isinstance(fn, matches):
        return repr(fn)
    return str(getattr(fn, "__qualname__", None) or repr(fn))


class Verdict(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What a policy decided for one call, and which rule decided it."""

    __interlock_name__ = "interlock.Verdict"  # its stable name in checkpoints

    action: Action
    rule: str
    """The rule that fired, or why the policy failed closed."""
    message: str | None = None
    """What the model is told (deny) or the question shown (require_approval)."""
    approvals: int = 1
    """For ``require_approval``: how many distinct people must approve the call."""
    authority: Authority | None = None
    """For ``require_approval``: who may approve the call."""
    confirm: bool = False
    """For ``require_approval``: an approval takes an explicit confirmation step."""


RuleSpec: TypeAlias = (
    Action | Rule | Sequence[Action | Rule] | Callable[[dict[str, Any]], Action | Rule | None]
)
"""What a policy holds for one tool: an action, a rule, a list of them, or a callable of the
arguments returning one (None: fall through to the default)."""


class ApprovalPolicy:
    """Which tool calls may run, which need a person's approval, which are refused.

    Args:
        rules: ``{tool_name: rule_spec}``; see `RuleSpec`. ``"*"`` names every tool the
            mapping does not list.
        default: What happens to a call no rule decides.

    Raises:
        TypeError, ValueError: A rule is malformed (named in the message).
    """

    __slots__ = ("_default", "_rules")

    def __init__(
        self,
        rules: Mapping[str, RuleSpec] | None = None,
        *,
        default: Action | Rule = "require_approval",
    ) -> None:
        if rules is not None and not isinstance(rules, Mapping):
            raise TypeError(
                f"rules must be a mapping of tool name to rule, not {type(rules).__name__}"
            )
        self._rules: dict[str, list[Rule] | Callable[..., Any]] = {}
        for name, spec in (rules or {}).items():
            if not isinstance(name, str) or not name:
                raise ValueError(f"a policy rule is keyed by a tool name, not {name!r}")
            self._rules[name] = _rules_of(name, spec)
        self._default = _rule_of("default", default)

    def __repr__(self) -> str:
        return f"<ApprovalPolicy {sorted(self._rules)} default={self._default.action}>"

    @property
    def tools(self) -> frozenset[str]:
        """The tool names with rules of their own."""
        return frozenset(self._rules)

    def may_ask(self, tool: str) -> bool:
        """Whether some call of ``tool`` may wait for a person's approval, read from the
        rules alone (nothing is called): what a picture of the graph marks as gated.

        It errs toward yes. The rules for ``tool`` (its own, else ``"*"``'s) are read in
        order: a ``require_approval`` rule says yes; a rule without ``when`` decides every
        call that reaches it, so the rules after it (and the default) are never reached; a
        ``when`` that is not a `matches` may raise or return something that is no bool,
        which fails closed into an approval, so it says yes; past the last rule, the
        default decides. A callable rule may return anything, so it says yes. A tool with
        no rules of its own gets the default.
        """
        spec = self._rules.get(tool, self._rules.get("*"))
        if spec is None:
            return self._default.action == "require_approval"
        if callable(spec):
            return True
        for rule in spec:
            if rule.action == "require_approval":
                return True
            if rule.when is None:
                return False
            if not isinstance(rule.when, matches):
                return True
        return self._default.action == "require_approval"

    def verdict(self, tool: str, arguments: dict[str, Any]) -> Verdict:
        """Decide one call; never raises (a rule that fails makes the call wait for approval)."""
        spec = self._rules.get(tool, self._rules.get("*"))
        if spec is None:
            return _verdict(self._default, "default")
        if callable(spec):
            # Failing closed asks for at least what the default would.
            known = [self._default]
            try:
                out = spec(dict(arguments))
            except Exception as exc:
                return _closed(tool, f"its rule raised {type(exc).__name__}: {exc}", known)
            if out is None:
                return _verdict(self._default, "default")
            if isinstance(out, str) and out in ACTIONS:
                out = Rule(out)  # type: ignore[arg-type]
            if not isinstance(out, Rule):
                return _closed(tool, f"its rule returned {out!r:.60}, which is no action", known)
            return _verdict(out, tool)
        for rule in spec:
            if rule.when is not None:
                try:
                    hit = rule.when(dict(arguments))
                except Exception as exc:
                    why = f"{rule.describe(tool)} raised {type(exc).__name__}: {exc}"
                    return _closed(tool, why, [*spec, self._default])
                if not isinstance(hit, bool):
                    why = f"{rule.describe(tool)} returned {hit!r:.40}, not a bool"
                    return _closed(tool, why, [*spec, self._default])
                if not hit:
                    continue
            return _verdict(rule, tool)
        return _verdict(self._default, "default")


def strictest(verdicts: Sequence[Verdict]) -> Verdict:
    """The strictest of several policies' verdicts (deny over approval over allow; of two
    approvals, the one that needs more people)."""
    strict = max(verdicts, key=lambda v: (_STRICTNESS[v.action], v.approvals))
    confirms = any(v.confirm for v in verdicts if v.action == "require_approval")
    if strict.action == "require_approval" and confirms and not strict.confirm:
        strict = msgspec.structs.replace(strict, confirm=True)
    return strict


def _verdict(rule: Rule, tool: str) -> Verdict:
    message = rule.message
    if rule.action == "deny" and message is None:
        message = _DENIED
    return Verdict(
        action=rule.action,
        rule=rule.describe(tool),
        message=message,
        approvals=rule.approvals,
        authority=rule.authority,
        confirm=rule.confirm,
    )


def _closed(tool: str, why: str, rules: Sequence[Rule]) -> Verdict:
    """The verdict of a policy that could not decide: wait for approval, by as many people as
    the rules it could not read might have asked for, confirmed if any of them asks it."""
    asking = [r for r in rules if r.action == "require_approval"]
    return Verdict(
        action="require_approval",
        rule=f"{tool}: fail closed: {why}",
        approvals=max((r.approvals for r in asking), default=1),
        confirm=any(r.confirm for r in asking),
    )


def _rule_of(tool: str, spec: Any) -> Rule:
    if isinstance(spec, Rule):
        return spec
    if isinstance(spec, str):
        if spec not in ACTIONS:
            raise ValueError(
                f"policy rule for {tool!r}: {spec!r} is no action; use one of {sorted(ACTIONS)}"
            )
        return Rule(spec)  # type: ignore[arg-type]
    raise TypeError(
        f"policy rule for {tool!r} must be an action string or a Rule, not {type(spec).__name__}"
    )


def _rules_of(tool: str, spec: Any) -> list[Rule] | Callable[..., Any]:
    if isinstance(spec, str | Rule):
        return [_rule_of(tool, spec)]
    if callable(spec):
        return spec  # type: ignore[no-any-return]
    if isinstance(spec, Sequence) and not isinstance(spec, bytes):
        rules = [_rule_of(tool, s) for s in spec]
        if not rules:
            raise ValueError(f"policy rule list for {tool!r} is empty")
        return rules
    raise TypeError(
        f"policy rule for {tool!r} must be an action, a Rule, a list of them or a callable, "
        f"not {type(spec).__name__}"
    )
