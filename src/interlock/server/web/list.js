// The pending list: what waits for a decision, filtered and paged, kept current by the
// event stream (new questions are added, answered ones are marked).

import * as api from "./api.js";
import { h, fill, liveTime } from "./dom.js";
import { failedCount } from "./failed.js";

const FILTERS = [
  ["thread", "Thread"],
  ["tool", "Tool"],
  ["key", "Key"],
];

const SETTLED = {
  "interrupt.decided": (e) => `Decided by ${e.actor ?? "someone"}`,
  "interrupt.expired": () => "Expired",
  "interrupt.cancelled": () => "Withdrawn",
};

/** The list view for hash query `params` (thread, tool, key). */
export function listView(params) {
  const filters = Object.fromEntries(FILTERS.map(([name]) => [name, params.get(name) ?? ""]));
  const items = new Map(); // id -> InterruptView, in the server's order
  const settled = new Map(); // id -> what happened to it, from the event stream
  let next = null; // the cursor of the page after the last one read
  let loading = null;
  let addedLive = new Set();

  const count = h("span", { className: "count" });
  const body = h("tbody");
  const table = h(
    "table",
    { className: "inbox" },
    h("caption", { className: "sr-only" }, "Questions waiting for a decision, oldest first"),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Question", "App", "Thread", "Tool", "Asked", "Deadline"].map((t) => h("th", { scope: "col" }, t)),
      ),
    ),
    body,
  );
  const empty = h("p", { className: "empty", hidden: true });
  const more = h("button", { type: "button", className: "secondary", hidden: true, onclick: () => load(next) }, "Load more");
  const problem = h("p", { className: "error", role: "alert" });
  const region = h("div", { className: "list", "aria-busy": "true" }, table, empty);
  // What changes live is said in a sentence, rather than the whole table read out again.
  const news = h("p", { className: "sr-only", role: "status" });
  // Threads whose run failed wait for a person too, on a view of their own.
  const failedBadge = h("span", { className: "badge status-failed", hidden: true });
  const failedLink = h("p", { className: "views" }, h("a", { href: "#/failed", id: "failed-link" }, "Failed threads"), " ", failedBadge);

  async function countFailed() {
    const n = await failedCount();
    failedBadge.textContent = n;
    failedBadge.hidden = !n;
  }

  const inputs = FILTERS.map(([name, label]) => {
    const id = `filter-${name}`;
    const input = h("input", { id, name, type: "search", value: filters[name], autocomplete: "off" });
    return h("div", { className: "field" }, h("label", { for: id }, label), input);
  });
  const form = h(
    "form",
    { className: "filters", role: "search", "aria-label": "Filter the questions", onsubmit: filter },
    inputs,
    h(
      "div",
      { className: "buttons" },
      h("button", { type: "submit", className: "secondary" }, "Filter"),
      h("button", { type: "button", className: "secondary", onclick: clear }, "Clear"),
    ),
  );

  function filter(event) {
    event.preventDefault();
    const query = new URLSearchParams();
    for (const [name, value] of new FormData(form)) if (value.trim()) query.set(name, value.trim());
    location.hash = query.size ? `#/?${query}` : "#/";
  }

  function clear() {
    for (const input of form.querySelectorAll("input")) input.value = "";
    if (FILTERS.some(([name]) => filters[name])) location.hash = "#/";
  }

  function quorum(item) {
    if (!(item.approvals > 1)) return null;
    const by = item.approved_by ?? [];
    const text = `${by.length} of ${item.approvals} approvals` + (by.length ? ` (${by.join(", ")})` : "");
    return h("span", { className: "badge quorum" }, text);
  }

  function row(item) {
    const gone = settled.get(item.id);
    return h(
      "tr",
      { "data-id": item.id, className: gone ? "settled" : "" },
      h(
        "td",
        { className: "question" },
        h("a", { href: `#/interrupts/${encodeURIComponent(item.id)}` }, item.summary || "(no question text)"),
        gone ? h("span", { className: "badge settled" }, gone) : null,
        quorum(item),
      ),
      h("td", { "data-label": "App" }, item.app),
      h("td", { "data-label": "Thread" }, h("a", { href: `#/threads/${encodeURIComponent(item.thread)}` }, item.thread)),
      h("td", { "data-label": "Tool" }, item.tool ?? "—"),
      h("td", { "data-label": "Asked" }, liveTime(item.created_at, "ago")),
      h("td", { "data-label": "Deadline" }, item.deadline ? liveTime(item.deadline, "deadline") : "none"),
    );
  }

  function render() {
    fill(body, [...items.values()].map(row));
    const waiting = [...items.keys()].filter((id) => !settled.has(id)).length;
    count.textContent = `${waiting}${next ? "+" : ""} waiting`;
    table.hidden = items.size === 0;
    empty.hidden = items.size > 0;
    const filtered = FILTERS.some(([name]) => filters[name]);
    empty.textContent = filtered ? "No question matches these filters." : "Nothing waits for a decision.";
    more.hidden = !next;
  }

  /** Read the first page (`after` null) afresh, or the page after cursor `after`. */
  function load(after = null) {
    const since = new Set(); // what the stream adds while the first page is read
    if (after === null) addedLive = since;
    const reading = api
      .interrupts({ ...filters, after, limit: 50 })
      .then((page) => {
        if (after === null) {
          const live = [...since].map((id) => items.get(id)).filter((i) => i && !settled.has(i.id));
          items.clear();
          for (const i of page.items) items.set(i.id, i);
          // Those may be newer than the page read; a later page that holds one leaves it be.
          for (const i of live) items.set(i.id, i);
        } else {
          for (const i of page.items) items.set(i.id, i);
        }
        next = page.next;
        problem.textContent = "";
        render();
      })
      .catch((error) => {
        problem.textContent = `The questions could not be read: ${error.message}`;
      })
      .finally(() => {
        if (loading === reading) region.setAttribute("aria-busy", "false");
      });
    loading = reading;
    region.setAttribute("aria-busy", "true");
    return reading;
  }

  async function created(event) {
    if (filters.thread && event.thread !== filters.thread) return;
    if (filters.tool && event.tool !== filters.tool) return;
    // Shown at once, even with pages left to read: the list is ordered by app, so a new
    // question may belong before the pages still to come, and paging would never reach it.
    let detail;
    try {
      detail = await api.interrupt(event.interrupt_id);
    } catch {
      return; // gone already, or out of this identity's scope
    }
    const item = detail.interrupt;
    if (item.status !== "pending" || (filters.key && item.key !== filters.key)) return;
    items.set(item.id, item);
    addedLive.add(item.id);
    render();
    news.textContent = `New question: ${item.summary}`;
  }

  function onEvent(event) {
    if (event.type === "run.failed" || event.type === "run.finished") countFailed();
    if (event.type === "interrupt.created") return created(event);
    const what = SETTLED[event.type];
    if (what && event.interrupt_id) {
      settled.set(event.interrupt_id, what(event));
      const item = items.get(event.interrupt_id);
      if (item) {
        render();
        news.textContent = `${what(event)}: ${item.summary}`;
      }
    }
  }

  load();
  countFailed();
  const element = h(
    "section",
    { className: "view" },
    h("h1", { tabindex: -1 }, "Pending questions ", count),
    failedLink,
    form,
    problem,
    region,
    more,
    news,
  );
  return {
    element,
    title: "Pending questions",
    onEvent,
    reload: () => {
      countFailed();
      return load();
    },
  };
}
