"""A principal's contact addresses: each names one principal, an e-mail address compared
case-insensitively, cleared with ``""`` (`ContactConformance`)."""

from __future__ import annotations

import anyio
import pytest

from ..._errors import ContactTaken, StoreClosed
from ...stores._base import Store
from ._common import ConformanceGroup

__all__ = ["ContactConformance"]


class ContactConformance(ConformanceGroup):
    """A principal's e-mail address and Slack user id: kept, looked up, unique, cleared.

    An e-mail address is kept as given (without the white space around it) and compared
    case-insensitively; a Slack user id is kept and compared as given. Each names one
    principal at most: giving one that another principal has raises `ContactTaken` (naming
    that principal) and writes nothing. ``""`` clears one in `Store.update_principal`, None
    leaves it as it is; a change of either is an identity change.
    """

    async def test_a_principal_is_found_by_its_contact_addresses(self, store: Store) -> None:
        ana = await store.add_principal(
            "Ana", role="approver", email="  Ana.Lima@Example.COM ", slack_user="U024BE7LH"
        )
        assert (ana.email, ana.slack_user) == ("Ana.Lima@Example.COM", "U024BE7LH")
        plain = await store.add_principal("ben", role="viewer")
        assert (plain.email, plain.slack_user) == (None, None)
        blank = await store.add_principal("carla", role="viewer", email="", slack_user="")
        assert (blank.email, blank.slack_user) == (None, None)
        assert await store.get_principal("ana") == ana
        assert await store.principal_by_contact(email="ana.lima@example.com") == ana
        assert await store.principal_by_contact(email=" ANA.LIMA@EXAMPLE.COM") == ana
        assert await store.principal_by_contact(slack_user="U024BE7LH") == ana
        assert await store.principal_by_contact(email="ben@example.com") is None
        assert await store.principal_by_contact(slack_user="U0000000") is None
        # A Slack user id is compared as given, and "W" ids (Enterprise Grid) are ids too.
        await store.update_principal("ben", slack_user="W12AB")
        assert (await store.principal_by_contact(slack_user="W12AB")) is not None
        assert [p.email for p in await store.principals()] == ["Ana.Lima@Example.COM", None, None]

    async def test_a_contact_address_names_one_principal(self, store: Store) -> None:
        ana = await store.add_principal(
            "ana", role="approver", email="ana@example.com", slack_user="U1ANA"
        )
        before = await store.identity_changes()
        with pytest.raises(ContactTaken, match="'ana'") as taken:
            await store.add_principal("ben", role="viewer", email="ANA@example.com")
        assert (taken.value.field, taken.value.value, taken.value.holder) == (
            "email",
            "ANA@example.com",
            "ana",
        )
        with pytest.raises(ContactTaken) as taken:
            await store.add_principal("ben", role="viewer", slack_user="U1ANA")
        assert (taken.value.field, taken.value.holder) == ("slack_user", "ana")
        assert await store.principals() == [ana]
        assert await store.identity_changes() == before
        ben = await store.add_principal("ben", role="viewer", email="ben@example.com")
        with pytest.raises(ContactTaken):
            await store.update_principal("ben", display_name="Ben", email="Ana@Example.Com")
        with pytest.raises(ContactTaken):
            await store.update_principal("ben", display_name="Ben", slack_user="U1ANA")
        assert await store.get_principal("ben") == ben
        # Its own address again (in another case) is no conflict.
        again = await store.update_principal("ana", email="ANA@EXAMPLE.COM", slack_user="U1ANA")
        assert again.email == "ANA@EXAMPLE.COM" and again.rev > ana.rev

    async def test_clearing_frees_an_address_and_every_change_is_an_identity_change(
        self, store: Store
    ) -> None:
        ana = await store.add_principal(
            "ana", role="approver", email="ana@example.com", slack_user="U1ANA"
        )
        ben = await store.add_principal("ben", role="viewer")
        kept = await store.update_principal("ana", role="admin")
        assert (kept.email, kept.slack_user) == ("ana@example.com", "U1ANA")
        cleared = await store.update_principal("ana", email="")
        assert (cleared.email, cleared.slack_user) == (None, "U1ANA")
        assert cleared.rev > kept.rev
        assert await store.principal_by_contact(email="ana@example.com") is None
        moved = await store.update_principal("ben", email="Ana@example.com", slack_user="U2BEN")
        assert await store.principal_by_contact(email="ana@example.com") == moved
        unslacked = await store.update_principal("ana", slack_user="")
        assert unslacked.slack_user is None
        assert await store.principal_by_contact(slack_user="U1ANA") is None
        taken = await store.update_principal("ana", slack_user="U1ANA")
        assert await store.principal_by_contact(slack_user="U1ANA") == taken
        changes = await store.identity_changes(after=ben.rev)
        assert changes == [moved, taken]
        assert ana.rev < ben.rev < moved.rev < taken.rev

    async def test_contact_arguments_are_refused_with_what_is_expected(self, store: Store) -> None:
        for wrong in (
            "ana",
            "ana@",
            "@example.com",
            "ana@@example.com",
            "ana lima@example.com",
            "Ana <ana@example.com>",
            "ana@example.com, ben@example.com",
            "ana@example..com",
            "ana@.example.com",
            "a" * 250 + "@example.com",
        ):
            with pytest.raises(ValueError, match="e-mail address"):
                await store.add_principal("ana", role="viewer", email=wrong)
        with pytest.raises(ValueError, match="email"):
            await store.add_principal("ana", role="viewer", email="ana@exa\u202emple.com")
        for wrong in ("u024be7lh", "U1", "X024BE7LH", "U024BE7LH ", "U" + "A" * 21, "ana"):
            with pytest.raises(ValueError, match="Slack user id"):
                await store.add_principal("ana", role="viewer", slack_user=wrong)
        with pytest.raises(TypeError, match="email"):
            await store.add_principal("ana", role="viewer", email=42)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="slack_user"):
            await store.add_principal("ana", role="viewer", slack_user=7)  # type: ignore[arg-type]
        assert await store.principals() == []
        await store.add_principal("ana", role="viewer", email="ana@example.com")
        with pytest.raises(ValueError, match="e-mail address"):
            await store.update_principal("ana", email="not an address")
        assert (await store.get_principal("ana")) is not None
        for both_or_none in ({}, {"email": "ana@example.com", "slack_user": "U1ANA"}):
            with pytest.raises(ValueError, match="exactly one"):
                await store.principal_by_contact(**both_or_none)
        with pytest.raises(ValueError, match="empty"):
            await store.principal_by_contact(email=" ")
        with pytest.raises(ValueError, match="empty"):
            await store.principal_by_contact(slack_user="")
        with pytest.raises(ValueError, match="Slack user id"):
            await store.principal_by_contact(slack_user="ana")

    async def test_concurrent_claims_of_one_address_give_it_to_one(self, store: Store) -> None:
        spellings = {
            "ana": "shared@example.com",
            "ben": "Shared@example.com",
            "carla": "SHARED@example.com",
            "dora": "shared@EXAMPLE.com",
        }
        for name in spellings:
            await store.add_principal(name, role="viewer")
        outcomes: list[str] = []
        async with anyio.create_task_group() as group:
            for name, email in spellings.items():
                group.start_soon(_take, store, name, email, outcomes)
        (winner,) = [o for o in outcomes if o != "taken"]
        assert outcomes.count("taken") == 3
        holder = await store.principal_by_contact(email="shared@example.com")
        assert holder is not None and holder.name == winner
        assert [p.name for p in await store.principals() if p.email] == [winner]

    async def test_a_closed_store_refuses_a_contact_lookup(self, store: Store) -> None:
        await store.close()
        with pytest.raises(StoreClosed):
            await store.principal_by_contact(email="ana@example.com")


async def _take(store: Store, name: str, email: str, outcomes: list[str]) -> None:
    try:
        await store.update_principal(name, email=email)
        outcomes.append(name)
    except ContactTaken:
        outcomes.append("taken")
