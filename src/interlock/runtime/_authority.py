"""Who may decide a question: `Principal`, `Authority`, and the one check every surface meets.

A question may name who may answer it (`Authority`): principals, groups or roles, and rules
of separation of duties (the run's starter may not; nor anyone who approved an earlier
question of the thread). The authority is stored with the question, shown to the people it
asks, and part of its payload hash. `App.decide` checks the deciding `Principal` against it
whatever surface the decision comes from (Python, the command line, HTTP, the web inbox, a
channel): a refusal raises `NotAuthorized` and records nothing.

Names are compared in their normal form (`interlock._principals.principal_key`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from .._errors import GraphDefinitionError, NotAuthorized
from .._principals import is_principal, principal_key

__all__ = [
    "ADMIN",
    "Authority",
    "Decider",
    "Principal",
    "authority_of",
    "check_authority",
    "check_override",
    "decider_of",
    "merge_authority",
]

ADMIN = "admin"
"""The role that may override a question's authority (with a reason, audited)."""


class Principal(msgspec.Struct, frozen=True, kw_only=True):
    """A person or service who decides: a name, the groups it belongs to, its roles.

    ``name`` is kept as given and compared in its normal form (`key`): ``Ana`` and ``ana`` are
    one principal. Surfaces build it from who signed in (a token's principal, an OpenID
    Connect login, the operating-system user of the command line).
    """

    name: str
    """Its name, as shown (recorded as the actor of its decisions)."""
    groups: tuple[str, ...] = ()
    """The groups it belongs to (``finance``, ``sre``...)."""
    roles: tuple[str, ...] = ()
    """Its roles (``admin`` may override an authority, with a reason)."""

    def __post_init__(self) -> None:
        principal_key(self.name)
        for group in self.groups:
            principal_key(group, "group")
        for role in self.roles:
            principal_key(role, "role")

    @property
    def key(self) -> str:
        """Its name in normal form (NFKC, case-folded)."""
        return principal_key(self.name)

    def in_group(self, group: str) -> bool:
        """Whether it belongs to ``group`` (names compared in normal form)."""
        want = principal_key(group, "group")
        return any(principal_key(g, "group") == want for g in self.groups)

    def has_role(self, role: str) -> bool:
        """Whether it has ``role`` (names compared in normal form)."""
        want = principal_key(role, "role")
        return any(principal_key(r, "role") == want for r in self.roles)


class Authority(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Who may decide a question, stored with it.

    With no principals, groups or roles named, anyone may decide (subject to the rules of
    separation of duties). Otherwise the decider must be one of the ``principals``, or belong
    to one of the ``groups``, or have one of the ``roles``. A quorum (how many distinct people
    must approve) is the question's ``approvals``; each of them is checked against this.

        approve("Refund 1,200 EUR?", approvals=2,
                authority=Authority(groups=("finance",), not_starter=True))
    """

    __interlock_name__ = "interlock.Authority"  # its stable name in checkpoints

    principals: tuple[str, ...] = ()
    """Names of the principals who may decide."""
    groups: tuple[str, ...] = ()
    """Groups whose members may decide."""
    roles: tuple[str, ...] = ()
    """Roles whose holders may decide."""
    not_starter: bool = False
    """The principal who started the run may not decide it (four eyes)."""
    not_approvers: bool = False
    """Nobody who approved an earlier question of the thread may decide this one."""

    def __post_init__(self) -> None:
        for name in self.principals:
            principal_key(name)
        for group in self.groups:
            principal_key(group, "group")
        for role in self.roles:
            principal_key(role, "role")

    @property
    def names_someone(self) -> bool:
        """Whether it says who may decide (not only who may not)."""
        return bool(self.principals or self.groups or self.roles)

    def describe(self, starter: str | None = None) -> str:
        """In words, for the people it asks: ``needs a member of group finance; not ana``."""
        who: list[str] = []
        if self.principals:
            who.append(" or ".join(self.principals))
        if self.groups:
            word = "group" if len(self.groups) == 1 else "groups"
            who.append(f"a member of {word} {' or '.join(self.groups)}")
        if self.roles:
            word = "role" if len(self.roles) == 1 else "roles"
            who.append(f"someone with {word} {' or '.join(self.roles)}")
        text = "needs " + " or ".join(who) if who else "anyone may decide"
        nots: list[str] = []
        if self.not_starter:
            nots.append(starter if starter else "the run's starter")
        if self.not_approvers:
            nots.append("an earlier approver")
        if nots:
            text += "; not " + " or ".join(nots)
        return text


def merge_authority(*parts: Authority | None) -> Authority | None:
    """One authority holding every rule of ``parts`` (None when there is none).

    The lists of who may decide are joined only where one part names nobody: two parts that
    both name someone keep the first's (a question's own authority wins over a default one),
    while the rules of separation of duties add up.
    """
    found = [p for p in parts if p is not None]
    if not found:
        return None
    naming = next((p for p in found if p.names_someone), None)
    return Authority(
        principals=naming.principals if naming else (),
        groups=naming.groups if naming else (),
        roles=naming.roles if naming else (),
        not_starter=any(p.not_starter for p in found),
        not_approvers=any(p.not_approvers for p in found),
    )


def check_authority(
    authority: Authority | None,
    *,
    interrupt_id: str,
    principal: Principal | None,
    starter: str | None,
    approvers: Iterable[str] = (),
) -> None:
    """Refuse ``principal`` deciding a question with ``authority``; nothing else changes.

    Args:
        authority: The question's authority (None: anyone).
        interrupt_id: The question, for the error.
        principal: Who decides (None: nobody named, as a script deciding on its own).
        starter: Who started the run that asked (its ``started_by``), if known.
        approvers: Who approved earlier questions of the thread.

    Raises:
        NotAuthorized: Which rule refused, and who may decide instead.
    """
    if authority is None:
        return
    if principal is None:
        if authority.names_someone or authority.not_starter or authority.not_approvers:
            raise NotAuthorized(
                f"interrupt {interrupt_id} {authority.describe(starter)}: decide it as a "
                "principal (actor=Principal(name=..., groups=...)); nothing was recorded",
                interrupt_id=interrupt_id,
                rule="principal",
            )
        return
    key = principal.key
    if authority.names_someone:
        allowed = (
            any(principal_key(n) == key for n in authority.principals)
            or any(principal.in_group(g) for g in authority.groups)
            or any(principal.has_role(r) for r in authority.roles)
        )
        if not allowed:
            raise NotAuthorized(
                f"{principal.name} may not decide interrupt {interrupt_id}: it "
                f"{authority.describe(starter)}; nothing was recorded",
                interrupt_id=interrupt_id,
                rule="who",
                principal=key,
            )
    if authority.not_starter and starter is not None and is_principal(starter, key):
        raise NotAuthorized(
            f"{principal.name} started this run and may not approve it (interrupt "
            f"{interrupt_id}); another person must. Nothing was recorded",
            interrupt_id=interrupt_id,
            rule="starter",
            principal=key,
        )
    if authority.not_approvers and any(is_principal(a, key) for a in approvers):
        raise NotAuthorized(
            f"{principal.name} approved an earlier question of this thread and may not decide "
            f"interrupt {interrupt_id}; another person must (nothing was recorded)",
            interrupt_id=interrupt_id,
            rule="approver",
            principal=key,
        )


def authority_of(value: Any) -> Authority | None:
    """Check an ``authority=`` argument."""
    if value is None or isinstance(value, Authority):
        return value
    raise GraphDefinitionError(f"authority must be an Authority or None, not {value!r}")


class Decider(msgspec.Struct, frozen=True, kw_only=True):
    """Who makes a decision, and on what terms: what `App.decide` and `App.resume` pass on."""

    actor: str | None = None
    """The name recorded with the decision (the principal's, when there is one)."""
    reason: str | None = None
    """Why, in their words."""
    principal: Principal | None = None
    """Who decides, checked against each question's authority (None: nobody named)."""
    override: str | None = None
    """An admin's reason for deciding outside the authority (recorded and audited)."""
    require: Authority | None = None
    """Rules added to every question's own (the App's default, a server's four eyes)."""


def decider_of(
    actor: str | Principal | None,
    reason: str | None,
    *,
    override: str | None = None,
    require: Authority | None = None,
) -> Decider:
    """The `Decider` an ``actor=`` names: a `Principal`, or a bare name (a principal with no
    groups or roles), or nobody.

    Raises:
        InvalidId: The name is not a valid principal name.
        ValueError: ``override`` is not a reason (non-empty text).
    """
    if override is not None and (not isinstance(override, str) or not override.strip()):
        raise ValueError(
            "override must be the reason for deciding outside the question's authority "
            "(non-empty text), or None"
        )
    if isinstance(actor, Principal):
        return Decider(
            actor=actor.name, reason=reason, principal=actor, override=override, require=require
        )
    principal = None if actor is None else Principal(name=actor)
    return Decider(
        actor=actor, reason=reason, principal=principal, override=override, require=require
    )


def check_override(decider: Decider, interrupt_id: str) -> None:
    """Refuse an override by someone who is not an admin.

    Raises:
        NotAuthorized: ``rule`` is ``override``.
    """
    principal = decider.principal
    if principal is None or not principal.has_role(ADMIN):
        who = principal.name if principal is not None else "a decision that names nobody"
        raise NotAuthorized(
            f"{who} may not override the authority of interrupt {interrupt_id}: only a "
            f"principal with role {ADMIN!r} may, with a reason (nothing was recorded)",
            interrupt_id=interrupt_id,
            rule="override",
            principal=principal.key if principal is not None else None,
        )
