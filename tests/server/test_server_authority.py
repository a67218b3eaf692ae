"""Who may decide, over HTTP: the runtime's check, met by the server's decisions too.

The server passes the caller's principal (its name, groups and role) to `App.decide`; the
question's authority, the App's, and the server's four eyes are all checked there.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, TypedDict

import anyio
import httpx2 as httpx
from _serving import serving
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from interlock import END, START, Authority, Graph, NotAuthorized, SqliteStore, approve
from interlock.server import Identity, TokenAuth, create_app, hash_token

PEOPLE = {
    "ana": Identity(name="ana", role="approver"),
    "ben": Identity(name="ben", role="approver"),
    "fin": Identity(name="fin", role="approver", groups=("Finance",)),
    "root": Identity(name="root", role="admin"),
}


def _auth(ana: str = "ana") -> TokenAuth:
    """The tokens; the ``ana`` token's identity is named ``ana`` as given (another spelling)."""
    people = {**PEOPLE, "ana": Identity(name=ana, role="approver")}
    return TokenAuth({hash_token(f"{token}-token"): who for token, who in people.items()})


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}-token"}


class Refund(TypedDict, total=False):
    ok: bool


def _refunds(path: Path, authority: Authority | None) -> Any:
    def review(s: Refund) -> Refund:
        return {"ok": approve("Refund 1,200 EUR?", authority=authority)}

    g = Graph(Refund, name="refunds")
    g.add_node("review", review).add_edge(START, "review").add_edge("review", END)
    return g.compile(store=SqliteStore(path))


def _asked(path: Path, authority: Authority | None, starter: str = "ana") -> None:
    async def run() -> None:
        app = _refunds(path, authority)
        await app.run({}, thread="r1", metadata={"started_by": starter})
        await app.store.close()

    anyio.run(run)


def _decide(
    client: httpx.Client, item: dict[str, Any], who: str, key: str, **extra: Any
) -> httpx.Response:
    body = {"answer": True, "payload_hash": item["payload_hash"], **extra}
    headers = {**_bearer(who), "Idempotency-Key": key}
    return client.post(f"/v1/interrupts/{item['id']}/decision", json=body, headers=headers)


def _decisions(path: Path) -> list[tuple[str | None, bytes]]:
    async def read() -> list[tuple[str | None, bytes]]:
        store = SqliteStore(path)
        try:
            entries = await store.audit_log(thread="r1")
            return [(e.actor, e.data) for e in entries if e.kind == "decision"]
        finally:
            await store.close()

    return anyio.run(read)


def test_four_eyes_knows_a_person_under_another_spelling(tmp_path: Path) -> None:
    # ana started the run (here, or from another surface); a server that knows her as `Ana`
    # or `ＡＮＡ` still knows her.
    path = tmp_path / "r.db"
    _asked(path, None, starter="ana")
    for n, spelling in enumerate(("ana", "Ana", "ＡＮＡ")):
        auth = _auth(spelling)
        factory = lambda: create_app(_refunds(path, None), auth=auth, four_eyes=True)  # noqa: E731, B023
        with serving(factory) as s, httpx.Client(base_url=s.url, timeout=10) as client:
            [item] = client.get("/v1/interrupts", headers=_bearer("ben")).json()["items"]
            assert item["authority"]["text"] == "anyone may decide; not ana"
            refused = _decide(client, item, "ana", key=f"k{n}")
            assert (refused.status_code, refused.json()["error"]) == (403, "four_eyes")
    assert _decisions(path) == []
    with (
        serving(lambda: create_app(_refunds(path, None), auth=_auth(), four_eyes=True)) as s,
        httpx.Client(base_url=s.url, timeout=10) as client,
    ):
        [item] = client.get("/v1/interrupts", headers=_bearer("ben")).json()["items"]
        assert _decide(client, item, "ben", key="k-ben").status_code == 201


def test_a_question_names_the_group_that_may_decide_it(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    finance = Authority(groups=("finance",))
    _asked(path, finance)
    with (
        serving(lambda: create_app(_refunds(path, finance), auth=_auth())) as s,
        httpx.Client(base_url=s.url, timeout=10) as client,
    ):
        [item] = client.get("/v1/interrupts", headers=_bearer("ben")).json()["items"]
        assert item["authority"]["groups"] == ["finance"]
        assert item["authority"]["text"] == "needs a member of group finance"
        # Seen by everyone in scope; decided only by finance.
        refused = _decide(client, item, "ben", key="k1")
        assert (refused.status_code, refused.json()["error"]) == (403, "not_authorized")
        assert "group finance" in refused.json()["message"]
        assert _decisions(path) == []
        assert _decide(client, item, "fin", key="k2").status_code == 201
        assert [actor for actor, _ in _decisions(path)] == ["fin"]


def test_only_an_admin_overrides_over_http_and_it_is_audited(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    finance = Authority(groups=("finance",))
    _asked(path, finance)
    with (
        serving(lambda: create_app(_refunds(path, finance), auth=_auth())) as s,
        httpx.Client(base_url=s.url, timeout=10) as client,
    ):
        [item] = client.get("/v1/interrupts", headers=_bearer("ben")).json()["items"]
        refused = _decide(client, item, "ben", key="k1", override="I am sure")
        assert (refused.status_code, refused.json()["error"]) == (403, "not_authorized")
        assert "override" in refused.json()["message"]
        without = _decide(client, item, "root", key="k2")
        assert without.status_code == 403  # an admin outside the authority needs the field
        done = _decide(client, item, "root", key="k3", override="finance is out; ticket 42")
        assert done.status_code == 201
        [(actor, data)] = _decisions(path)
        assert actor == "root" and b'"override":"finance is out; ticket 42"' in data


# -- no surface records a decision by someone outside the authority --------------------------

_NAMES = ("ana", "Ana", "ＡＮＡ", "bob", "carol", "Straße", "strasse")
_GROUPS = ("finance", "Finance", "sre", "sales")


def _inside(authority: Authority, name: str, groups: tuple[str, ...], starter: str) -> bool:
    from interlock._principals import principal_key as key

    named = {key(n) for n in authority.principals}
    allowed = {key(g) for g in authority.groups}
    member = bool({key(g) for g in groups} & allowed)
    ok = not authority.names_someone or key(name) in named or member
    return ok and not (authority.not_starter and key(name) == key(starter))


def _module(folder: Path, authority: Authority) -> str:
    """A module the command line imports: the refunds app with ``authority`` on a file."""
    name = f"refunds_{abs(hash((str(folder), repr(authority))))}"
    (folder / f"{name}.py").write_text(
        "from pathlib import Path\n"
        "from typing import TypedDict\n"
        "from interlock import Authority, END, START, Graph, SqliteStore, approve\n"
        f"AUTHORITY = {authority!r}\n"
        "class Refund(TypedDict, total=False):\n"
        "    ok: bool\n"
        "def review(s):\n"
        "    return {'ok': approve('Refund 1,200 EUR?', authority=AUTHORITY)}\n"
        "def make():\n"
        "    g = Graph(Refund, name='refunds')\n"
        "    g.add_node('review', review).add_edge(START, 'review').add_edge('review', END)\n"
        f"    return g.compile(store=SqliteStore(Path({str(folder / 'r.db')!r})))\n"
    )
    return name


@settings(max_examples=45, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    surface=st.sampled_from(["python", "http", "cli"]),
    allowed=st.lists(st.sampled_from(_NAMES), max_size=2),
    groups_allowed=st.lists(st.sampled_from(_GROUPS), max_size=2),
    not_starter=st.booleans(),
    starter=st.sampled_from(_NAMES),
    name=st.sampled_from(_NAMES),
    groups=st.lists(st.sampled_from(_GROUPS), max_size=2),
)
def test_no_surface_records_a_decision_outside_the_authority(
    surface: str,
    allowed: list[str],
    groups_allowed: list[str],
    not_starter: bool,
    starter: str,
    name: str,
    groups: list[str],
) -> None:
    import sys
    import tempfile

    from click.testing import CliRunner

    from interlock import Principal
    from interlock.cli import cli

    authority = Authority(
        principals=tuple(allowed), groups=tuple(groups_allowed), not_starter=not_starter
    )
    # The command line decides as a named principal with no groups (its operating-system
    # user, or --actor): it is inside only by name.
    who_groups = () if surface == "cli" else tuple(groups)
    inside = _inside(authority, name, who_groups, starter)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = folder / "r.db"
        _asked(path, authority, starter=starter)
        app = _refunds(path, authority)
        [question] = anyio.run(app.inbox)
        if surface == "python":

            async def python() -> None:
                who = Principal(name=name, groups=who_groups)
                await app.decide("r1", {question.id: True}, actor=who)

            with contextlib.suppress(NotAuthorized):
                anyio.run(python)
        elif surface == "http":
            identity = Identity(name=name, role="approver", groups=who_groups)
            api = create_app(app, auth=TokenAuth({hash_token("t"): identity}), continue_runs=False)

            async def http() -> int:
                transport = httpx.ASGITransport(app=api)
                async with httpx.AsyncClient(transport=transport, base_url="http://x") as c:
                    r = await c.post(
                        f"/v1/interrupts/{question.id}/decision",
                        json={"answer": True, "payload_hash": app.payload_hash(question)},
                        headers={"Authorization": "Bearer t", "Idempotency-Key": "k"},
                    )
                    return r.status_code

            status = anyio.run(http)
            assert status in (201, 403), status
        else:
            module = _module(folder, authority)
            sys.path.insert(0, str(folder))
            try:
                result = CliRunner().invoke(
                    cli,
                    ["approve", question.id, "--actor", name, "--no-continue"],
                    env={"INTERLOCK_APP": f"{module}:make", "COLUMNS": "200"},
                )
            finally:
                sys.path.remove(str(folder))
                sys.modules.pop(module, None)
            assert result.exit_code in (0, 1), result.output
            assert (result.exit_code == 0) == inside, result.output
        anyio.run(app.store.close)
        recorded = [actor for actor, _ in _decisions(path)]
        assert (recorded == [name]) == inside, (surface, recorded, inside)
        assert recorded in ([], [name])
