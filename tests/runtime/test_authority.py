"""Who may decide: a question's `Authority`, checked by `App.decide` for every surface.

A refusal raises `NotAuthorized`, says which rule refused, and records nothing: the question
stays pending, the audit log does not move, the checkpoint head stays where it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from interlock import (
    END,
    START,
    App,
    Authority,
    Graph,
    InvalidId,
    MemoryStore,
    NotAuthorized,
    Principal,
    SqliteStore,
    Store,
    approve,
    ask,
    interrupt,
)
from interlock._principals import principal_key
from interlock.observability import _hooks
from interlock.runtime._signals import Raised
from interlock.runtime._wire import raised_from_wire, raised_to_wire

pytestmark = pytest.mark.anyio

FINANCE = Authority(groups=("finance",))
FOUR_EYES = Authority(not_starter=True)


class S(TypedDict, total=False):
    ok: bool
    second: bool
    note: str


def _app(
    authority: Authority | None = FINANCE,
    *,
    store: Store | None = None,
    approvals: int = 1,
    app_authority: Authority | None = None,
) -> App[S]:
    def review(s: S) -> S:
        return {"ok": approve("Refund 1,200 EUR?", approvals=approvals, authority=authority)}

    g = Graph(S, name="refunds")
    g.add_node("review", review).add_edge(START, "review").add_edge("review", END)
    return g.compile(store=store or MemoryStore(), authority=app_authority)


def _two_questions(second: Authority | None) -> App[S]:
    def first(s: S) -> S:
        return {"ok": approve("Deploy to staging?")}

    def then(s: S) -> S:
        return {"second": approve("Deploy to production?", authority=second)}

    g = Graph(S, name="deploys")
    g.add_node("first", first).add_node("then", then)
    g.add_edge(START, "first").add_edge("first", "then").add_edge("then", END)
    return g.compile(store=MemoryStore())


async def _nothing_recorded(app: App[Any], thread: str, before: tuple[str, int]) -> None:
    state = await app.get_state(thread)
    audit = await app.store.audit_log(thread=thread)
    assert (state.checkpoint_id, len(audit)) == before
    assert [i.status for i in state.interrupts] == ["pending"] * len(state.interrupts)


async def _mark(app: App[Any], thread: str) -> tuple[str, int]:
    return (await app.get_state(thread)).checkpoint_id, len(
        await app.store.audit_log(thread=thread)
    )


# -- names --------------------------------------------------------------------------------------


def test_principal_names_compare_in_normal_form_and_refuse_look_alikes() -> None:
    assert principal_key("Ana") == principal_key("ana") == principal_key("ＡＮＡ")
    assert principal_key("Straße") == principal_key("STRASSE")
    for bad in ("ana ", " ana", "", "a\u200bna", "a\nna", "ana\u202e"):
        with pytest.raises(InvalidId):
            principal_key(bad)
    with pytest.raises(InvalidId):
        Principal(name="ana ")
    with pytest.raises(InvalidId):
        Authority(groups=("fin\x00ance",))


# -- who may decide -----------------------------------------------------------------------------


async def test_only_the_named_group_may_decide_and_a_refusal_records_nothing() -> None:
    app = _app(FINANCE)
    result = await app.run({}, thread="t", metadata={"started_by": "ana"})
    [question] = result.interrupts
    assert question.authority == FINANCE and question.started_by == "ana"
    before = await _mark(app, "t")
    for outsider in ("bob", Principal(name="bob", groups=("sales",)), None):
        with pytest.raises(NotAuthorized) as refused:
            await app.decide("t", {question.id: True}, actor=outsider)
        assert refused.value.rule == ("principal" if outsider is None else "who")
        assert "group finance" in str(refused.value)
        await _nothing_recorded(app, "t", before)
    # Group names compare in normal form too.
    [decision] = await app.decide(
        "t", {question.id: True}, actor=Principal(name="Carol", groups=("Finance",))
    )
    assert decision.actor == "Carol"


async def test_principals_and_roles_name_who_may_decide() -> None:
    app = _app(Authority(principals=("Dora",), roles=("treasurer",)))
    [question] = (await app.run({}, thread="t")).interrupts
    with pytest.raises(NotAuthorized):
        await app.decide("t", {question.id: True}, actor="eve")
    await app.decide("t", {question.id: True}, actor="ＤＯＲＡ")  # Dora, typed full-width
    other = _app(Authority(roles=("treasurer",)))
    [q2] = (await other.run({}, thread="t")).interrupts
    await other.decide("t", {q2.id: True}, actor=Principal(name="fay", roles=("Treasurer",)))


async def test_the_starter_may_not_decide_whatever_case_or_width_they_type() -> None:
    app = _app(FOUR_EYES)
    [question] = (await app.run({}, thread="t", metadata={"started_by": "ana"})).interrupts
    before = await _mark(app, "t")
    for same in ("ana", "Ana", "ＡＮＡ", Principal(name="ANA", groups=("finance",))):
        with pytest.raises(NotAuthorized) as refused:
            await app.decide("t", {question.id: True}, actor=same)
        assert refused.value.rule == "starter"
        await _nothing_recorded(app, "t", before)
    with pytest.raises(InvalidId):
        await app.decide("t", {question.id: True}, actor="ana ")
    await app.decide("t", {question.id: True}, actor="bob")


async def test_resume_with_answers_is_held_to_the_same_rules() -> None:
    app = _app(FINANCE)
    [question] = (await app.run({}, thread="t")).interrupts
    with pytest.raises(NotAuthorized):
        await app.resume("t", {question.id: True}, actor="bob")
    done = await app.resume(
        "t", {question.id: True}, actor=Principal(name="carol", groups=("finance",))
    )
    assert done.status == "done" and done.values["ok"] is True


async def test_an_in_process_handler_cannot_answer_a_question_that_names_who_decides() -> None:
    app = _app(FINANCE)

    async def yes(_: Any) -> bool:
        return True

    with pytest.raises(NotAuthorized):
        await app.run({}, thread="t", on_interrupt=yes)


async def test_the_starter_goes_on_with_the_run_whoever_continues_it(tmp_path: Path) -> None:
    # The first question is answered and the thread continued by another process, which
    # names no starter: the second question still refuses the one who started the run.
    path = tmp_path / "deploys.db"

    def build() -> App[S]:
        def stage(s: S) -> S:
            return {"ok": approve("Deploy to staging?")}

        def prod(s: S) -> S:
            return {"second": approve("Deploy to production?", authority=FOUR_EYES)}

        g = Graph(S, name="deploys")
        g.add_node("stage", stage).add_node("prod", prod)
        g.add_edge(START, "stage").add_edge("stage", "prod").add_edge("prod", END)
        return g.compile(store=SqliteStore(path))

    one = build()
    [staging] = (await one.run({}, thread="t", metadata={"started_by": "ana"})).interrupts
    two = build()  # another process
    [production] = (await two.resume("t", {staging.id: True}, actor="bob")).interrupts
    assert production.started_by == "ana"
    three = build()
    with pytest.raises(NotAuthorized) as refused:
        await three.decide("t", {production.id: True}, actor="Ana")
    assert refused.value.rule == "starter"
    await three.decide("t", {production.id: True}, actor="carol")
    for app in (one, two, three):
        await app.store.close()


async def test_an_earlier_approver_may_be_kept_from_deciding_again() -> None:
    app = _two_questions(Authority(not_approvers=True))
    [staging] = (await app.run({}, thread="t")).interrupts
    [production] = (await app.resume("t", {staging.id: True}, actor="bob")).interrupts
    with pytest.raises(NotAuthorized) as refused:
        await app.decide("t", {production.id: True}, actor="Bob")
    assert refused.value.rule == "approver"
    await app.decide("t", {production.id: True}, actor="carol")


async def test_a_quorum_counts_only_approvers_within_the_authority() -> None:
    app = _app(Authority(groups=("sre",), not_starter=True), approvals=2)
    [question] = (await app.run({}, thread="t", metadata={"started_by": "ana"})).interrupts
    ana = Principal(name="ana", groups=("sre",))
    with pytest.raises(NotAuthorized):
        await app.decide("t", {question.id: True}, actor=ana)
    with pytest.raises(NotAuthorized):
        await app.decide("t", {question.id: True}, actor="dev")
    [vote] = await app.decide(
        "t", {question.id: True}, actor=Principal(name="sam", groups=("sre",))
    )
    assert not vote.final
    [last] = await app.decide(
        "t", {question.id: True}, actor=Principal(name="sue", groups=("sre",))
    )
    assert last.final and last.approved_by == ("sam", "sue")


# -- the App's rules, a surface's rules, overrides ----------------------------------------------


async def test_the_apps_authority_holds_for_every_question() -> None:
    app = _app(None, app_authority=FOUR_EYES)
    [question] = (await app.run({}, thread="t", metadata={"started_by": "ana"})).interrupts
    assert question.authority is None
    with pytest.raises(NotAuthorized):
        await app.decide("t", {question.id: True}, actor="ana")
    with pytest.raises(NotAuthorized):
        await app.resume("t", {question.id: True}, actor="ana")
    await app.decide("t", {question.id: True}, actor="bob")


async def test_a_surface_may_add_a_rule_for_its_decisions() -> None:
    app = _app(None)
    [question] = (await app.run({}, thread="t", metadata={"started_by": "ana"})).interrupts
    with pytest.raises(NotAuthorized):
        await app.decide("t", {question.id: True}, actor="ana", require=FOUR_EYES)
    await app.decide("t", {question.id: True}, actor="ana")  # without it, anyone may


async def test_only_an_admin_overrides_and_the_override_is_recorded() -> None:
    app = _app(FINANCE)
    [question] = (await app.run({}, thread="t")).interrupts
    with pytest.raises(NotAuthorized) as refused:
        await app.decide("t", {question.id: True}, actor="bob", override="urgent")
    assert refused.value.rule == "override"
    root = Principal(name="root", roles=("admin",))
    with pytest.raises(ValueError, match="override must be the reason"):
        await app.decide("t", {question.id: True}, actor=root, override="   ")
    [decision] = await app.decide("t", {question.id: True}, actor=root, override="incident 42")
    assert decision.override == "incident 42"
    [entry] = [e for e in await app.store.audit_log(thread="t") if e.kind == "decision"]
    assert b'"override":"incident 42"' in entry.data and entry.actor == "root"


async def test_a_refusal_is_counted_by_rule() -> None:
    seen: list[tuple[str | None, str]] = []

    class Observer:
        def decision_refused(self, tool: str | None, rule: str) -> None:
            seen.append((tool, rule))

        def __getattr__(self, name: str) -> Any:
            return lambda *args: None  # what else the runtime reports is not counted here

    observer = Observer()
    _hooks.subscribe(observer)  # type: ignore[arg-type]
    try:
        app = _app(Authority(groups=("finance",), not_starter=True))
        [q] = (await app.run({}, thread="t", metadata={"started_by": "ana"})).interrupts
        for actor in ("bob", Principal(name="ana", groups=("finance",))):
            with pytest.raises(NotAuthorized):
                await app.decide("t", {q.id: True}, actor=actor)
    finally:
        _hooks.unsubscribe(observer)  # type: ignore[arg-type]
    assert seen == [(None, "who"), (None, "starter")]


# -- what is stored and shown --------------------------------------------------------------------


async def test_the_authority_is_stored_shown_and_part_of_the_payload_hash(tmp_path: Path) -> None:
    path = tmp_path / "refunds.db"
    app = _app(Authority(groups=("finance",), not_starter=True), store=SqliteStore(path))
    await app.run({}, thread="t", metadata={"started_by": "ana"})
    fresh = _app(Authority(groups=("finance",), not_starter=True), store=SqliteStore(path))
    [listed] = await fresh.inbox()
    question = await fresh.question(listed.id)
    assert question is not None
    for shown in (listed, question.interrupt):
        assert shown.authority == Authority(groups=("finance",), not_starter=True)
        assert shown.started_by == "ana"
        assert shown.authority.describe(shown.started_by) == (
            "needs a member of group finance; not ana"
        )
    plain = _app(None)
    [other] = (await plain.run({}, thread="t")).interrupts
    assert other.info == listed.info and plain.payload_hash(other) != fresh.payload_hash(listed)
    # A person shown the question under another authority is refused as a changed question.
    with pytest.raises(Exception, match="changed since it was shown"):
        await fresh.decide(
            "t",
            {listed.id: True},
            actor=Principal(name="carol", groups=("finance",)),
            seen={listed.id: plain.payload_hash(other)},
        )
    await app.store.close()
    await fresh.store.close()


def test_the_wire_keeps_the_authority_and_reads_the_old_shapes() -> None:
    from interlock import Address, Interrupt

    base = Interrupt(
        id="i1", thread="t", key=None, address=Address.parse("node:a"), kind="dynamic",
        info={"q": 1}, created_at=1.0,
    )  # fmt: skip
    old = raised_to_wire(Raised(base))
    assert len(old) == 14 and raised_from_wire(old, "t").interrupt == base
    import msgspec

    stamped = msgspec.structs.replace(base, authority=FINANCE, started_by="ana")
    wire = raised_to_wire(Raised(stamped))
    assert len(wire) == 16
    assert raised_from_wire(wire, "t").interrupt == stamped
    wire[-2] = {"groups": ["fin\x00"]}
    with pytest.raises(ValueError, match="authority"):
        raised_from_wire(wire, "t")


async def test_free_text_and_raw_interrupts_take_an_authority_too() -> None:
    def node(s: S) -> S:
        note = ask("Why?", authority=Authority(principals=("ana",)))
        interrupt({"q": "ok?"}, authority=FINANCE)
        return {"note": note}

    g = Graph(S, name="notes")
    g.add_node("n", node).add_edge(START, "n").add_edge("n", END)
    app = g.compile()
    [question] = (await app.run({}, thread="t")).interrupts
    with pytest.raises(NotAuthorized):
        await app.decide("t", {question.id: "because"}, actor="bob")
    await app.decide("t", {question.id: "because"}, actor="Ana")


# -- nobody outside the authority gets a decision recorded ---------------------------------------

_NAMES = st.sampled_from(["ana", "Ana", "bob", "carol", "ＡＮＡ", "dora", "Straße", "strasse"])
_GROUPS = st.lists(st.sampled_from(["finance", "Finance", "sre", "sales"]), max_size=2)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    allowed_names=st.lists(_NAMES, max_size=2),
    allowed_groups=_GROUPS,
    not_starter=st.booleans(),
    starter=_NAMES,
    name=_NAMES,
    groups=_GROUPS,
)
def test_no_principal_outside_the_authority_gets_a_decision_recorded(
    allowed_names: list[str],
    allowed_groups: list[str],
    not_starter: bool,
    starter: str,
    name: str,
    groups: list[str],
) -> None:
    import anyio

    authority = Authority(
        principals=tuple(allowed_names), groups=tuple(allowed_groups), not_starter=not_starter
    )
    key = principal_key(name)
    inside = (
        not authority.names_someone
        or key in {principal_key(n) for n in allowed_names}
        or bool({principal_key(g) for g in groups} & {principal_key(g) for g in allowed_groups})
    ) and not (not_starter and key == principal_key(starter))

    async def attempt() -> bool:
        app = _app(authority)
        [q] = (await app.run({}, thread="t", metadata={"started_by": starter})).interrupts
        try:
            await app.decide("t", {q.id: True}, actor=Principal(name=name, groups=tuple(groups)))
        except NotAuthorized:
            state = await app.get_state("t")
            assert [i.status for i in state.interrupts] == ["pending"]
            return False
        return True

    assert anyio.run(attempt) == inside


async def test_on_postgresql_the_authority_and_the_starter_travel_between_processes(
    dsn: str,
) -> None:
    from interlock.stores import PostgresStore

    def build() -> App[S]:
        def stage(s: S) -> S:
            return {"ok": approve("Deploy to staging?")}

        def prod(s: S) -> S:
            sre = Authority(groups=("sre",), not_starter=True)
            return {"second": approve("Deploy to production?", authority=sre)}

        g = Graph(S, name="deploys")
        g.add_node("stage", stage).add_node("prod", prod)
        g.add_edge(START, "stage").add_edge("stage", "prod").add_edge("prod", END)
        return g.compile(store=PostgresStore(dsn))

    one, two, three = build(), build(), build()
    try:
        [staging] = (await one.run({}, thread="t", metadata={"started_by": "sam"})).interrupts
        [prod] = (await two.resume("t", {staging.id: True}, actor="bob")).interrupts
        [listed] = await three.inbox()
        assert listed.id == prod.id and listed.started_by == "sam"
        assert listed.authority == Authority(groups=("sre",), not_starter=True)
        for who in (Principal(name="SAM", groups=("sre",)), Principal(name="bob")):
            with pytest.raises(NotAuthorized):
                await three.decide("t", {prod.id: True}, actor=who)
        [decision] = await three.decide(
            "t", {prod.id: True}, actor=Principal(name="sue", groups=("SRE",))
        )
        assert decision.actor == "sue"
    finally:
        for app in (one, two, three):
            await app.store.close()
