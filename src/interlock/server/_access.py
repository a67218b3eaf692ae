"""What a person signed in elsewhere may do here: a role and scopes from their groups or roles.

The single sign-on provider and a trusted proxy tell the server who a person is and which
groups (or roles) they are in; the server's configuration says what each group may do
(`GroupAccess`). A person in several listed groups gets the highest of their roles and every
tool and thread their groups grant, so a group's grant is one that may be combined with any
other. A person in no listed group is refused, unless a ``default_role`` is configured.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import msgspec

from .._errors import InvalidId
from .._principals import principal_key
from ._auth import ROLES, Identity, Role

__all__ = ["MAX_GROUPS", "AccessRules", "GroupAccess", "NoAccess"]

MAX_GROUPS: Final = 500
"""The most groups a person may be in; more is refused, not cut (a cut list could drop the
group that grants or names an `Authority`)."""
_MAX_GROUP: Final = 256
_RANK: Final[dict[str, int]] = {r: i for i, r in enumerate(ROLES)}


class GroupAccess(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What the members of one group may do."""

    role: Role
    """``viewer``, ``approver`` or ``admin``."""
    tools: tuple[str, ...] = ("*",)
    """Patterns of the tools whose questions they may see and decide (``*`` is every one)."""
    threads: tuple[str, ...] = ("",)
    """Prefixes of the thread ids they may see and act on (``""`` is every thread)."""

    def __post_init__(self) -> None:
        if self.role not in _RANK:
            raise ValueError(f"role must be one of {list(ROLES)}, not {self.role!r}")
        for field in ("tools", "threads"):
            value = getattr(self, field)
            if not isinstance(value, tuple) or not all(isinstance(v, str) for v in value):
                raise TypeError(f"{field} must be a tuple of str, not {value!r}")
            if not value:
                raise ValueError(f"{field} must not be empty: give ('*',) or ('',) for every one")


class NoAccess(Exception):
    """Raised when a person who proved who they are may not use this server."""


class AccessRules:
    """Turns a name, groups and roles asserted by a provider or a proxy into an `Identity`.

    Args:
        roles: ``{group: role or GroupAccess}``; a role alone grants every tool and thread.
        default_role: The role of a person in no listed group (None: refuse them).
        by_role: The role comes from the person's roles as the provider names them (a claim
            or a header), not from their groups; ``roles`` must then be empty.
    """

    def __init__(
        self,
        roles: Mapping[str, Role | GroupAccess],
        *,
        default_role: Role | None,
        by_role: bool,
    ) -> None:
        if not isinstance(roles, Mapping):
            raise TypeError(f"roles must be a mapping of group to role, not {roles!r}")
        if by_role and roles:
            raise ValueError(
                "give either a role claim (the provider names each person's role) or roles "
                "(a role for each group), not both"
            )
        if default_role is not None and default_role not in _RANK:
            raise ValueError(f"default_role must be one of {list(ROLES)} or None")
        self.by_role = by_role
        self.default_role = default_role
        self.groups: dict[str, GroupAccess] = {}
        for group, access in roles.items():
            if not isinstance(group, str) or not group or len(group) > _MAX_GROUP:
                raise ValueError(f"group name {group!r} must be 1-{_MAX_GROUP} characters")
            if isinstance(access, str):
                access = GroupAccess(role=access)
            if not isinstance(access, GroupAccess):
                raise TypeError(f"roles[{group!r}] must be a role or a GroupAccess")
            self.groups[group] = access

    def identity(self, name: object, groups: object, roles: object = None) -> Identity:
        """The identity of ``name`` in ``groups`` (and with ``roles``, when they decide).

        Raises:
            NoAccess: the name is not a valid principal name, the groups or roles are not
                a list of names, or none of them grants anything here.
        """
        try:
            principal_key(name, "the name the provider gave")
        except InvalidId as exc:
            raise NoAccess(str(exc)) from exc
        assert isinstance(name, str)
        member_of = _names(groups, "groups")
        if self.by_role:
            named = set(_names(roles, "roles"))
            held = [r for r in ROLES if r in named]  # from the least to the most allowed
            if held:
                return _identity(name, held[-1], ("*",), ("",), member_of)
        else:
            grants = [self.groups[g] for g in member_of if g in self.groups]
            if grants:
                role = max((g.role for g in grants), key=_RANK.__getitem__)
                tools = _union(g.tools for g in grants)
                threads = _union(g.threads for g in grants)
                return _identity(name, role, tools, threads, member_of)
        if self.default_role is not None:
            return _identity(name, self.default_role, ("*",), ("",), member_of)
        if self.by_role:
            raise NoAccess(f"{name} holds none of the roles {list(ROLES)}")
        listed = ", ".join(sorted(self.groups)) or "none"
        raise NoAccess(f"{name} is in no group this server grants access to (it grants: {listed})")


def _names(value: object, what: str) -> tuple[str, ...]:
    """A provider's list of names: a list of strings, one string, or nothing."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, Sequence) or not all(
        isinstance(v, str) and 0 < len(v) <= _MAX_GROUP for v in value
    ):
        raise NoAccess(f"the {what} the provider gave are not a list of names")
    if len(value) > MAX_GROUPS:
        raise NoAccess(f"the provider gave {len(value)} {what}; at most {MAX_GROUPS} are taken")
    return tuple(dict.fromkeys(value))


def _union(scopes: Iterable[tuple[str, ...]]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(s for scope in scopes for s in scope))


def _identity(
    name: str, role: Role, tools: tuple[str, ...], threads: tuple[str, ...], groups: tuple[str, ...]
) -> Identity:
    return Identity(name=name, role=role, tools=tools, threads=threads, groups=groups)
