"""A confirmation step over HTTP: an approval of a question that asks for one needs
``confirmed`` in its body, or it is refused (428) and nothing is recorded.

The web inbox, Slack and the e-mail links each show the step and then send ``confirmed``; a
client that skips it is refused by the server, not trusted to have shown it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

import anyio
import httpx2 as httpx
from _serving import serving

from interlock import END, START, Graph, SqliteStore, approve
from interlock.server import Identity, TokenAuth, create_app, hash_token

AUTH = TokenAuth({hash_token("ana-token"): Identity(name="ana", role="approver")})
ANA = {"Authorization": "Bearer ana-token"}


class Dropped(TypedDict, total=False):
    ok: bool


def _drops(path: Path, confirm: bool) -> Any:
    def review(s: Dropped) -> Dropped:
        return {"ok": approve("Drop the orders table?", confirm=confirm)}

    g = Graph(Dropped, name="drops")
    g.add_node("review", review).add_edge(START, "review").add_edge("review", END)
    return g.compile(store=SqliteStore(path))


def _asked(path: Path, confirm: bool, threads: tuple[str, ...]) -> None:
    async def run() -> None:
        app = _drops(path, confirm)
        for thread in threads:
            await app.run({}, thread=thread)
        await app.store.close()

    anyio.run(run)


def _post(client: httpx.Client, item: dict[str, Any], key: str, **body: Any) -> httpx.Response:
    return client.post(
        f"/v1/interrupts/{item['id']}/decision",
        json={"payload_hash": item["payload_hash"], **body},
        headers={**ANA, "Idempotency-Key": key},
    )


def test_an_approval_without_the_confirmation_step_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "d.db"
    _asked(path, True, ("a", "b"))
    with (
        serving(lambda: create_app(_drops(path, True), auth=AUTH)) as s,
        httpx.Client(base_url=s.url, timeout=10) as client,
    ):
        items = {i["thread"]: i for i in client.get("/v1/interrupts", headers=ANA).json()["items"]}
        assert items["a"]["confirm"] is True
        detail = client.get(f"/v1/interrupts/{items['a']['id']}", headers=ANA).json()
        assert detail["interrupt"]["confirm"] is True
        for n, answer in enumerate((True, "approve", "YES")):
            refused = _post(client, items["a"], f"k{n}", answer=answer)
            assert (refused.status_code, refused.json()["error"]) == (428, "confirmation_required")
            assert "confirmed" in refused.json()["message"]
        still = client.get(f"/v1/interrupts/{items['a']['id']}", headers=ANA).json()
        assert still["interrupt"]["status"] == "pending" and still["decision"] is None
        # A rejection lets nothing run: no step.
        assert _post(client, items["b"], "kb", answer=False).status_code == 201
        done = _post(client, items["a"], "ka", answer=True, confirmed=True, wait=True)
        assert done.status_code == 201
        assert done.json()["thread_view"]["values"] == {"ok": True}


def test_a_question_that_does_not_ask_approves_in_one_step(tmp_path: Path) -> None:
    path = tmp_path / "d.db"
    _asked(path, False, ("a",))
    with (
        serving(lambda: create_app(_drops(path, False), auth=AUTH)) as s,
        httpx.Client(base_url=s.url, timeout=10) as client,
    ):
        [item] = client.get("/v1/interrupts", headers=ANA).json()["items"]
        assert item["confirm"] is False
        assert _post(client, item, "k", answer=True).status_code == 201
