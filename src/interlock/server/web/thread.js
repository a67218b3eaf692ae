// One thread: its status (and why it failed), the questions it waits on, its recent messages
// (an edited call marked), what its model calls used, and its audit trail.

import * as api from "./api.js";
import { auditList, editsOf, messageList, stateBlock, statusBadge, usageBlock } from "./context.js";
import { h, fill, liveTime, when } from "./dom.js";
import { failure } from "./failed.js";

/** The view of thread `id`. */
export function threadView(id) {
  const title = h("h1", { tabindex: -1 }, `Thread ${id}`);
  const body = h("div", { className: "columns" });
  let app = null;
  let reads = 0;
  let shown = 0;

  async function load() {
    const seq = ++reads;
    let thread;
    let trail;
    try {
      thread = await api.thread(id, app);
      trail = await api.audit(id, thread.app);
    } catch (error) {
      if (seq < shown) return;
      const why = error.status === 404 ? "There is no such thread." : `The thread could not be read: ${error.message}`;
      fill(body, h("p", { className: "error", role: "alert" }, why));
      return;
    }
    if (seq < shown) return; // an older read answered late
    shown = seq;
    app = thread.app;
    studio.href = `#/threads/${encodeURIComponent(id)}/studio?app=${encodeURIComponent(app)}`;
    const waiting = thread.interrupts.length
      ? h(
          "ul",
          { className: "plain" },
          thread.interrupts.map((i) =>
            h("li", {}, h("a", { href: `#/interrupts/${encodeURIComponent(i.id)}` }, i.summary || i.id), " · asked ", liveTime(i.created_at, "ago")),
          ),
        )
      : h("p", { className: "muted" }, "No question waits.");
    fill(
      body,
      h(
        "div",
        { className: "main-column" },
        failure(thread),
        h(
          "section",
          { className: "card" },
          h("h2", {}, "Status"),
          h(
            "dl",
            { className: "facts" },
            h("dt", {}, "Status"),
            h("dd", {}, statusBadge(thread.status, "thread-status")),
            h("dt", {}, "App"),
            h("dd", {}, thread.app),
            h("dt", {}, "Updated"),
            h("dd", {}, when(thread.updated_at)),
            h("dt", {}, "Step"),
            h("dd", {}, String(thread.step)),
          ),
          h("h3", {}, "Waiting on"),
          waiting,
        ),
        h("section", { className: "card", id: "usage" }, h("h2", {}, "Model usage"), usageBlock(thread.usage)),
        h("section", { className: "card" }, h("h2", {}, "Recent messages"), messageList(thread.messages, editsOf(trail.items)), stateBlock(thread.values)),
      ),
      h("div", { className: "side-column" }, h("section", { className: "card" }, h("h2", {}, "Audit trail"), auditList(trail.items))),
    );
  }

  function onEvent(event) {
    if (event.thread === id && (!app || !event.app || event.app === app)) load();
  }

  const studio = h("a", { className: "button secondary small", href: `#/threads/${encodeURIComponent(id)}/studio` }, "Open in Studio");
  load();
  const element = h(
    "article",
    { className: "view" },
    h("nav", { className: "crumbs" }, h("a", { href: "#/" }, "← Pending questions")),
    title,
    h("p", { className: "views" }, studio),
    body,
  );
  return { element, title: `Thread ${id}`, onEvent, reload: load };
}
