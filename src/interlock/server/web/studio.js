// The Studio of one thread (#/threads/<id>/studio): its graph with where the thread stands,
// its timeline (newest first, paged), two checkpoints compared, and (admins) a fork.
//
// Everyone who may read the thread sees the graph, the timeline and comparisons; the fork
// controls are offered only to an admin who sees every tool (the server refuses anyone else).

import * as api from "./api.js";
import { changeList } from "./changes.js";
import { statusBadge } from "./context.js";
import { h, fill, when } from "./dom.js";
import { forkForm } from "./fork.js";
import { entryItem } from "./timeline.js";

const MARKS = [
  ["waiting", "waits for a person"],
  ["next", "runs next"],
  ["done", "ran in this run"],
  ["failed", "failed"],
];

/** Whether identity `me` may fork: an admin whose access is not limited to some tools. */
export function mayFork(me) {
  return me?.role === "admin" && (me.tools ?? ["*"]).includes("*");
}

/** The Studio of thread `id`; `me` is who is signed in, `app` the app asked for (or null). */
export function studioView(id, { me, app: wanted = null }) {
  let app = wanted;
  let entries = []; // newest first, as the server pages them
  let next = null;
  let picked = []; // checkpoint ids, at most two
  let reads = 0;
  const items = new Map(); // checkpoint id -> {key, li}

  const status = h("span", { className: "thread-status" });
  const problem = h("p", { className: "error", role: "alert" });

  const drawing = h("figure", { className: "drawing", "aria-label": `The graph of thread ${id}` });
  const legend = h("ul", { className: "legend", "aria-label": "What the colours mean" });
  const graphText = h("pre", { className: "json", tabindex: 0, "aria-label": "The graph as Mermaid text" });
  const graphNote = h("p", { className: "error", role: "alert" });
  const graphCard = h(
    "section",
    { className: "card studio-graph", "aria-labelledby": "studio-graph-title" },
    h("h2", { id: "studio-graph-title" }, "Graph"),
    legend,
    graphNote,
    drawing,
    h("details", { className: "graph-text" }, h("summary", {}, "The graph as text"), graphText),
  );

  const compareBody = h("div", { className: "compare-body" }, h("p", { className: "muted" }, "Tick two entries of the timeline to see what changed between them."));
  const compareCard = h("section", { className: "card studio-compare", "aria-labelledby": "studio-compare-title" }, h("h2", { id: "studio-compare-title" }, "Compare"), compareBody);

  const forkBody = h("div");
  const forkCard = h("section", { className: "card studio-fork", "aria-labelledby": "studio-fork-title", hidden: true }, h("h2", { id: "studio-fork-title" }, "Fork"), forkBody);

  const list = h("ol", { className: "timeline", "aria-label": "Checkpoints, newest first" });
  const more = h("button", { type: "button", className: "secondary", hidden: true, onclick: () => loadTimeline(next) }, "Show older");
  const timelineNote = h("p", { className: "error", role: "alert" });
  const shown = h("span", { className: "count" });
  const timelineCard = h(
    "section",
    { className: "card studio-timeline", "aria-labelledby": "studio-timeline-title" },
    h("h2", { id: "studio-timeline-title" }, "Timeline ", shown),
    timelineNote,
    list,
    more,
  );

  function showLegend(marks) {
    const present = new Set(Object.values(marks ?? {}));
    fill(
      legend,
      MARKS.map(([mark, text]) =>
        h("li", { className: present.has(mark) ? "present" : "absent" }, h("span", { className: `swatch mark-${mark}`, "aria-hidden": "true" }), ` ${text}`),
      ),
    );
  }

  let drawn = null; // the Mermaid text on show, not drawn again when it has not changed
  let graphReads = 0;

  async function loadGraph() {
    const seq = ++graphReads;
    let graph;
    try {
      graph = await api.graph(id, app);
    } catch (error) {
      if (seq === graphReads) graphNote.textContent = `The graph could not be read: ${error.message}`;
      return;
    }
    if (seq !== graphReads || graph.mermaid === drawn) return; // stale, or the same drawing
    drawn = graph.mermaid;
    graphNote.textContent = "";
    showLegend(graph.marks);
    graphText.textContent = graph.mermaid;
    drawing.dataset.marks = JSON.stringify(graph.marks ?? {});
    try {
      // Loaded when a drawing is first shown, not with the inbox: the renderer is large, and
      // should it fail to load the rest of the page still works (the text is shown instead).
      const { renderGraph } = await import("./graph.js");
      await renderGraph(drawing, graph.mermaid);
    } catch (error) {
      graphNote.textContent = `The graph could not be drawn (${error.message}); here it is as text.`;
      fill(drawing, h("pre", { className: "json" }, graph.mermaid));
    }
  }

  function pick(entry, checked) {
    picked = picked.filter((ck) => ck !== entry.checkpoint_id);
    if (checked) picked.push(entry.checkpoint_id);
    if (picked.length > 2) picked = picked.slice(-2);
    for (const box of list.querySelectorAll("input.pick")) {
      box.checked = picked.includes(box.closest("li.entry").dataset.checkpoint);
    }
    compare();
  }

  function brief(c) {
    return [`step ${c.step}`, " ", statusBadge(c.status), ` ${when(c.created_at)}`];
  }

  async function compare() {
    if (picked.length < 2) {
      fill(compareBody, h("p", { className: "muted" }, picked.length ? "Tick one more entry to compare with." : "Tick two entries of the timeline to see what changed between them."));
      return;
    }
    // Older first: its index in the newest-first list is the larger one.
    const [from, to] = [...picked].sort((a, b) => entries.findIndex((e) => e.checkpoint_id === b) - entries.findIndex((e) => e.checkpoint_id === a));
    fill(compareBody, h("p", { className: "muted" }, "Comparing…"));
    const asked = picked.join();
    let result;
    try {
      result = await api.compare(id, app, from, to);
    } catch (error) {
      if (picked.join() === asked) fill(compareBody, h("p", { className: "error", role: "alert" }, `The checkpoints could not be compared: ${error.message}`));
      return;
    }
    if (picked.join() !== asked) return; // another pair was picked meanwhile
    fill(
      compareBody,
      h("p", { className: "compared" }, "From ", brief(result.from_checkpoint), h("br"), "to ", brief(result.to_checkpoint)),
      changeList(result.changes, "Nothing differs between these two checkpoints."),
      h("button", { type: "button", className: "secondary small", onclick: clearPicks }, "Clear"),
    );
  }

  function clearPicks() {
    picked = [];
    for (const box of list.querySelectorAll("input.pick")) box.checked = false;
    compare();
  }

  function openFork(entry) {
    fill(forkBody, forkForm({ thread: id, app, entry, onCancel: closeFork }));
    forkCard.hidden = false;
    forkCard.scrollIntoView({ block: "nearest" });
    forkBody.querySelector("textarea")?.focus({ preventScroll: true });
  }

  function closeFork() {
    fill(forkBody);
    forkCard.hidden = true;
  }

  function render() {
    const canFork = mayFork(me);
    const nodes = entries.map((entry) => {
      const key = JSON.stringify(entry);
      const known = items.get(entry.checkpoint_id);
      if (known?.key === key) return known.li;
      const li = entryItem(entry, { thread: id, app, picked: picked.includes(entry.checkpoint_id), onPick: pick, onFork: canFork ? openFork : null });
      items.set(entry.checkpoint_id, { key, li });
      return li;
    });
    fill(list, nodes);
    more.hidden = !next;
    shown.textContent = `${entries.length}${next ? "+" : ""} checkpoints`;
  }

  /** Read the newest page (`before` null: merged into what is shown), or the page older than `before`. */
  async function loadTimeline(before = null) {
    const seq = ++reads;
    let page;
    more.disabled = true;
    try {
      page = await api.timeline(id, app, before);
    } catch (error) {
      timelineNote.textContent = `The timeline could not be read: ${error.message}`;
      more.disabled = false;
      return;
    }
    more.disabled = false;
    if (before === null && seq !== reads) return; // a newer read of the first page is on its way
    timelineNote.textContent = "";
    if (before !== null) {
      if (entries.at(-1)?.checkpoint_id !== before) return; // the list changed meanwhile
      entries = entries.concat(page.items);
      next = page.next;
    } else {
      const fresh = new Map(page.items.map((e) => [e.checkpoint_id, e]));
      const oldest = page.items.at(-1)?.checkpoint_id;
      const joins = entries.some((e) => e.checkpoint_id === oldest);
      if (!entries.length || !joins) {
        // First read, or more new checkpoints than a page: start again from the newest.
        entries = page.items;
        next = page.next;
      } else {
        const older = entries.slice(entries.findIndex((e) => e.checkpoint_id === oldest) + 1);
        entries = [...page.items, ...older.filter((e) => !fresh.has(e.checkpoint_id))];
      }
    }
    render();
  }

  async function load() {
    let thread;
    try {
      thread = await api.thread(id, app);
    } catch (error) {
      fill(problem, error.status === 404 ? "There is no such thread, or you may not see it." : `The thread could not be read: ${error.message}`);
      return;
    }
    fill(problem);
    app = thread.app;
    fill(status, statusBadge(thread.status, "studio-status"), ` · app ${thread.app} · step ${thread.step}`);
    await Promise.all([loadGraph(), loadTimeline()]);
  }

  function onEvent(event) {
    if (event.thread === id && (!app || !event.app || event.app === app)) load();
  }

  load();
  const element = h(
    "article",
    { className: "view studio" },
    h("nav", { className: "crumbs" }, h("a", { href: "#/" }, "← Pending questions"), " · ", h("a", { href: `#/threads/${encodeURIComponent(id)}` }, `Thread ${id}`)),
    h("h1", { tabindex: -1 }, `Studio · ${id}`),
    h("p", { className: "status-line" }, status),
    problem,
    graphCard,
    h("div", { className: "columns" }, h("div", { className: "main-column" }, timelineCard), h("div", { className: "side-column" }, forkCard, compareCard)),
  );
  return { element, title: `Studio · ${id}`, onEvent, reload: load };
}
