"""The graph renderer shipped in the package: Mermaid's browser build, the very file of the npm
package the drawing tests parse with (pinned in ``tests/graph/mermaid/package-lock.json``),
served gzip-encoded, and ``web/graph.js`` rendering a marked drawing in a real Chromium."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from _serving import Serving, auth, order_app, serving
from playwright.sync_api import Browser

from interlock.agents import ApprovalPolicy, ScriptedModel, ToolAgent, supervisor, tool
from interlock.server import create_app
from interlock.server._graph import MERMAID_VERSION

ROOT = Path(__file__).resolve().parents[2]
VENDOR = ROOT / "src" / "interlock" / "server" / "web" / "vendor"
PARSER = ROOT / "tests" / "graph" / "mermaid"
PACKAGE = PARSER / "node_modules" / "mermaid"
SCRIPT = "/web/vendor/mermaid.min.js"


def _package_file(name: str) -> bytes:
    """A file of the npm package the lock file pins (installed by ``npm ci``)."""
    if not (PACKAGE / "package.json").exists():
        raise RuntimeError(
            f"Mermaid's npm package is not installed in {PARSER}: run `npm ci` there (Node.js 20 "
            "or later), or run tests/graph/test_draw.py first, which does"
        )
    return (PACKAGE / name).read_bytes()


def test_the_vendored_build_is_the_locked_packages_byte_for_byte() -> None:
    lock = json.loads((PARSER / "package-lock.json").read_text(encoding="utf-8"))
    assert lock["packages"][""]["dependencies"]["mermaid"] == MERMAID_VERSION == "11.17.2"
    assert lock["packages"]["node_modules/mermaid"]["version"] == MERMAID_VERSION
    installed = json.loads(_package_file("package.json"))
    assert installed["version"] == MERMAID_VERSION, "run `npm ci` in tests/graph/mermaid again"
    shipped = gzip.decompress((VENDOR / "mermaid.min.js.gz").read_bytes())
    assert shipped == _package_file("dist/mermaid.min.js")
    assert (VENDOR / "LICENSE").read_bytes() == _package_file("LICENSE")
    assert (VENDOR / "LICENSE").read_text(encoding="utf-8").startswith("The MIT License")
    readme = (VENDOR / "README.md").read_text(encoding="utf-8")
    assert readme.startswith(f"# Vendored: Mermaid {MERMAID_VERSION}\n")
    assert f"mermaid@{MERMAID_VERSION}" in readme


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    db = tmp_path_factory.mktemp("renderer") / "orders.db"
    with serving(lambda: create_app(order_app(db), auth=auth())) as s:
        yield s


def _get(server: Serving, **headers: str) -> tuple[httpx.Response, bytes]:
    """The answer and its body as sent (not decoded)."""
    with (
        httpx.Client(base_url=server.url, timeout=30) as client,
        client.stream("GET", SCRIPT, headers=headers) as r,
    ):
        return r, b"".join(r.iter_raw())


def test_the_server_sends_it_gzip_encoded_and_revalidated(server: Serving) -> None:
    r, raw = _get(server, **{"Accept-Encoding": "br, gzip;q=0.8"})
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/javascript; charset=utf-8"
    assert r.headers["content-encoding"] == "gzip"
    assert r.headers["cache-control"] == "no-cache"
    assert r.headers["vary"] == "Accept-Encoding"
    assert raw == (VENDOR / "mermaid.min.js.gz").read_bytes()
    assert gzip.decompress(raw) == _package_file("dist/mermaid.min.js")
    etag = r.headers["etag"]
    again, body = _get(server, **{"Accept-Encoding": "gzip", "If-None-Match": etag})
    assert (again.status_code, body, again.headers["etag"]) == (304, b"", etag)


@pytest.mark.parametrize("accepts", ["identity", "gzip;q=0, deflate", ""])
def test_a_client_that_takes_no_gzip_gets_the_plain_file(server: Serving, accepts: str) -> None:
    r, raw = _get(server, **{"Accept-Encoding": accepts})
    assert r.status_code == 200
    assert "content-encoding" not in r.headers
    assert r.headers["content-type"] == "text/javascript; charset=utf-8"
    assert raw == _package_file("dist/mermaid.min.js")
    gzipped, _ = _get(server, **{"Accept-Encoding": "gzip"})
    assert r.headers["etag"] != gzipped.headers["etag"]  # two representations, two tags
    again, body = _get(server, **{"Accept-Encoding": accepts, "If-None-Match": r.headers["etag"]})
    assert (again.status_code, body) == (304, b"")


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    return path


def _marked_drawing() -> str:
    cleaner = ToolAgent("cleaner", ScriptedModel(["ok"]), [delete_file], policy=ApprovalPolicy())
    team = supervisor(ScriptedModel(["ok"]), [cleaner], name="team")
    return team.draw(marks={"model": "done", "cleaner/tools": "waiting"})


RENDER = """async ([text, broken]) => {
  const { renderGraph } = await import("/web/graph.js");
  const box = document.createElement("div");
  document.body.append(box);
  const svg = await renderGraph(box, text);
  const again = await renderGraph(document.body.appendChild(document.createElement("div")), text);
  const fill = (el) => getComputedStyle(el.querySelector("rect, circle, polygon, path")).fill;
  const node = [...box.querySelectorAll("g.node")].find((g) => g.id.includes("-n2_n1-"));
  const cluster = [...box.querySelectorAll("g.cluster")].find((g) => g.id.endsWith("-n2"));
  const done = [...box.querySelectorAll("g.node")].find((g) => g.id.includes("-n0-"));
  const bad = document.body.appendChild(document.createElement("div"));
  const failed = await renderGraph(bad, broken);
  return {
    tag: svg && svg.tagName,
    inBox: svg !== null && svg.parentElement === box,
    secondTag: again && again.tagName,
    scripts: document.querySelectorAll('script[src$="/web/vendor/mermaid.min.js"]').length,
    node: [node.getAttribute("class"), fill(node)],
    cluster: [cluster.getAttribute("class"), fill(cluster)],
    done: [done.getAttribute("class"), fill(done)],
    failed,
    alert: bad.querySelector("[role=alert]").textContent,
    pre: bad.querySelector("pre").textContent,
  };
}"""


def test_graph_js_renders_a_marked_drawing_with_the_vendored_build(
    server: Serving, browser: Browser
) -> None:
    page = browser.new_page()
    try:
        # A blank page of the server's origin (its own pages set their policies; not tested here).
        page.route(
            f"{server.url}/blank",
            lambda route: route.fulfill(body="<!doctype html><title>graph</title>", status=200),
        )
        page.goto(f"{server.url}/blank")
        broken = "flowchart TD\n    end --> x\n"
        found: dict[str, Any] = page.evaluate(RENDER, [_marked_drawing(), broken])
    finally:
        page.close()
    assert found["tag"] == "svg" and found["inBox"] and found["secondTag"] == "svg"
    assert found["scripts"] == 1  # loaded once, for both drawings
    amber, green = "rgb(254, 243, 199)", "rgb(220, 252, 231)"
    assert found["node"] == ["node default gated waiting", amber]
    assert found["cluster"] == ["cluster waiting", amber]
    assert found["done"] == ["node default done", green]
    assert found["failed"] is None
    assert found["alert"].startswith("The graph could not be drawn: Parse error on line 2")
    assert found["pre"] == broken
