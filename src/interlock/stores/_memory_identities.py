"""`MemoryStore`'s principals and tokens: a few dicts and the identity revision.

Each method decides and changes the table without awaiting anything, so a call is atomic for
the tasks of one event loop, as a transaction is for the SQL stores. The arguments are
checked already (the store calls the checks of `_identities` first).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from .._errors import ContactTaken, PrincipalExists, UnknownPrincipal, UnknownToken
from .._principals import principal_key
from ._identities import (
    Contact,
    IdentityChange,
    PrincipalRecord,
    Role,
    TokenRecord,
    email_key,
    revision_ahead,
    token_taken,
)

__all__ = ["IdentityTable"]


class IdentityTable:
    """The principals (by key) and tokens (by id) of one `MemoryStore`."""

    def __init__(self) -> None:
        self._principals: dict[str, PrincipalRecord] = {}
        self._tokens: dict[str, TokenRecord] = {}
        self._hashes: set[str] = set()
        # Invariant: the key of the principal that has each contact address (an e-mail
        # address in the form of email_key), and only those.
        self._contacts: dict[tuple[Contact, str], str] = {}
        # Invariant: the highest rev of any record here (0 before the first write).
        self._rev = 0

    def __len__(self) -> int:
        return len(self._principals)

    def _next(self) -> int:
        self._rev += 1
        return self._rev

    def add_principal(
        self,
        key: str,
        name: str,
        *,
        role: Role,
        display_name: str,
        groups: tuple[str, ...],
        email: str | None,
        slack_user: str | None,
        now: float,
    ) -> PrincipalRecord:
        """`Store.add_principal`."""
        found = self._principals.get(key)
        if found is not None:
            raise PrincipalExists(name, found.name)
        self._check_free(key, email, slack_user)
        record = PrincipalRecord(
            name=name,
            display_name=display_name,
            role=role,
            groups=groups,
            email=email,
            slack_user=slack_user,
            created_at=now,
            rev=self._next(),
        )
        self._principals[key] = record
        self._index(key, None, record)
        return record

    def update_principal(
        self,
        key: str,
        name: str,
        *,
        role: Role | None,
        display_name: str | None,
        groups: tuple[str, ...] | None,
        disabled: bool | None,
        email: str | None,
        slack_user: str | None,
    ) -> PrincipalRecord:
        """`Store.update_principal` (for ``email`` and ``slack_user``, ``""`` clears)."""
        found = self._principals.get(key)
        if found is None:
            raise UnknownPrincipal(name)
        self._check_free(key, email or None, slack_user or None)
        record = msgspec.structs.replace(
            found,
            role=found.role if role is None else role,
            display_name=found.display_name if display_name is None else display_name,
            groups=found.groups if groups is None else groups,
            disabled=found.disabled if disabled is None else disabled,
            email=found.email if email is None else email or None,
            slack_user=found.slack_user if slack_user is None else slack_user or None,
            rev=self._next(),
        )
        self._principals[key] = record
        self._index(key, found, record)
        return record

    def principal_by_contact(self, field: Contact, value: str) -> PrincipalRecord | None:
        """`Store.principal_by_contact` (an e-mail address in the form of `email_key`)."""
        key = self._contacts.get((field, value))
        return None if key is None else self._principals[key]

    def _check_free(self, key: str, email: str | None, slack_user: str | None) -> None:
        asked: tuple[tuple[Contact, str | None, str | None], ...] = (
            ("email", email, None if email is None else email_key(email)),
            ("slack_user", slack_user, slack_user),
        )
        for field, value, lookup in asked:
            holder = None if lookup is None else self._contacts.get((field, lookup))
            if value is not None and holder is not None and holder != key:
                raise ContactTaken(field, value, self._principals[holder].name)

    def _index(self, key: str, old: PrincipalRecord | None, new: PrincipalRecord) -> None:
        if old is not None:
            if old.email is not None:
                del self._contacts["email", email_key(old.email)]
            if old.slack_user is not None:
                del self._contacts["slack_user", old.slack_user]
        if new.email is not None:
            self._contacts["email", email_key(new.email)] = key
        if new.slack_user is not None:
            self._contacts["slack_user", new.slack_user] = key

    def get_principal(self, key: str) -> PrincipalRecord | None:
        """`Store.get_principal`."""
        return self._principals.get(key)

    def principals(self, limit: int, after: str | None) -> list[PrincipalRecord]:
        """`Store.principals`, ``after`` a key."""
        keys = sorted(k for k in self._principals if after is None or k > after)
        return [self._principals[k] for k in keys[:limit]]

    def add_token(
        self,
        id: str,
        *,
        hash: str,
        principal: str,
        role: Role | None,
        tools: tuple[str, ...],
        threads: tuple[str, ...],
        expires_at: float | None,
        now: float,
    ) -> TokenRecord:
        """`Store.add_token`."""
        owner = self._principals.get(principal_key(principal))
        if owner is None:
            raise UnknownPrincipal(principal)
        if id in self._tokens or hash in self._hashes:
            raise token_taken(id)
        record = TokenRecord(
            id=id,
            hash=hash,
            principal=owner.name,
            role=role,
            tools=tools,
            threads=threads,
            created_at=now,
            expires_at=None if expires_at is None else float(expires_at),
            rev=self._next(),
        )
        self._tokens[id] = record
        self._hashes.add(hash)
        return record

    def tokens(self, principal: str | None, limit: int, after: str | None) -> list[TokenRecord]:
        """`Store.tokens`, ``principal`` a key."""
        ids = sorted(
            i
            for i, t in self._tokens.items()
            if (after is None or i > after)
            and (principal is None or principal_key(t.principal) == principal)
        )
        return [self._tokens[i] for i in ids[:limit]]

    def revoke_tokens(
        self, id: str | None, principal: tuple[str, str] | None, now: float
    ) -> list[TokenRecord]:
        """`Store.revoke_tokens`; ``principal`` is its key and its name as given."""
        if id is not None:
            found = self._tokens.get(id)
            if found is None:
                raise UnknownToken(id)
            targets = [found]
        else:
            assert principal is not None
            key, name = principal
            if key not in self._principals:
                raise UnknownPrincipal(name)
            targets = [t for t in self._tokens.values() if principal_key(t.principal) == key]
        revoked: list[TokenRecord] = []
        for token in sorted(targets, key=lambda t: t.id):
            if token.revoked_at is not None:
                continue
            record = msgspec.structs.replace(token, revoked_at=now, rev=self._next())
            self._tokens[token.id] = record
            revoked.append(record)
        return revoked

    def touch_tokens(self, used: Mapping[str, float]) -> None:
        """`Store.touch_tokens`."""
        for id, at in used.items():
            token = self._tokens.get(id)
            if token is not None and (token.last_used_at is None or at > token.last_used_at):
                self._tokens[id] = msgspec.structs.replace(token, last_used_at=at)

    def changes(self, after: int, limit: int) -> list[IdentityChange]:
        """`Store.identity_changes`."""
        if after > self._rev:
            raise revision_ahead(after, self._rev)
        found: Sequence[IdentityChange] = [
            *(p for p in self._principals.values() if p.rev > after),
            *(t for t in self._tokens.values() if t.rev > after),
        ]
        return sorted(found, key=lambda r: r.rev)[:limit]

    def clear(self) -> None:
        """Forget everything (the store closes)."""
        self._principals.clear()
        self._tokens.clear()
        self._hashes.clear()
        self._contacts.clear()
