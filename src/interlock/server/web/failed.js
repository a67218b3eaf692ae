// Threads whose run failed: what went wrong, and the command that continues each once the
// cause is fixed. The server lists only the threads the identity may see.

import * as api from "./api.js";
import { h, fill, liveTime } from "./dom.js";

/** A command shown as code, with a button that copies it. */
export function copyable(command, label) {
  const done = h("span", { className: "copied", role: "status" });
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(command);
      done.textContent = "Copied";
    } catch {
      done.textContent = "Select the command to copy it";
    }
  };
  return h(
    "div",
    { className: "command" },
    h("code", { className: "continue-with", tabindex: 0, "aria-label": label }, command),
    h("button", { type: "button", className: "secondary small", onclick: copy, "aria-label": `Copy: ${label}` }, "Copy"),
    done,
  );
}

/** What a failed thread says: its error, and how to continue it (when its continuation failed). */
export function failure(thread) {
  if (!thread.error && !thread.continue_with) return null;
  return h(
    "section",
    { className: "card failure", "aria-label": "Why the thread failed" },
    h("h2", {}, "The run failed"),
    thread.error ? h("pre", { className: "json failure-error", tabindex: 0 }, thread.error) : null,
    thread.continue_with
      ? [h("h3", {}, "Once the cause is fixed, continue it with"), copyable(thread.continue_with, `Command that continues ${thread.thread}`)]
      : null,
  );
}

/** The count of failed threads, for a link: "3", "50+" or "" (none, or unreadable). */
export async function failedCount() {
  try {
    const page = await api.threads({ status: "failed", limit: 50 });
    return page.items.length ? `${page.items.length}${page.next ? "+" : ""}` : "";
  } catch {
    return "";
  }
}

/** The view of the failed threads. */
export function failedView() {
  const items = new Map(); // `${app}\0${thread}` -> ThreadItem, in the server's order
  let next = null;
  let reads = 0;
  const count = h("span", { className: "count" });
  const body = h("tbody");
  const table = h(
    "table",
    { className: "inbox failed" },
    h("caption", { className: "sr-only" }, "Threads whose run failed, by app and thread"),
    h("thead", {}, h("tr", {}, ["Thread", "App", "Failed", "Error", "Continue with"].map((t) => h("th", { scope: "col" }, t)))),
    body,
  );
  const empty = h("p", { className: "empty", hidden: true }, "No thread has failed.");
  const more = h("button", { type: "button", className: "secondary", hidden: true, onclick: () => load(next) }, "Load more");
  const problem = h("p", { className: "error", role: "alert" });

  function row(t) {
    return h(
      "tr",
      { "data-thread": t.thread },
      h("td", { "data-label": "Thread" }, h("a", { href: `#/threads/${encodeURIComponent(t.thread)}` }, t.thread)),
      h("td", { "data-label": "App" }, t.app),
      h("td", { "data-label": "Failed" }, liveTime(t.updated_at, "ago")),
      h("td", { "data-label": "Error", className: "failure-error" }, t.error ?? "—"),
      h("td", { "data-label": "Continue with" }, t.continue_with ? copyable(t.continue_with, `Command that continues ${t.thread}`) : "—"),
    );
  }

  function render() {
    fill(body, [...items.values()].map(row));
    count.textContent = `${items.size}${next ? "+" : ""} failed`;
    table.hidden = items.size === 0;
    empty.hidden = items.size > 0;
    more.hidden = !next;
  }

  /** Read the first page afresh (`after` null), or the page after cursor `after`. */
  async function load(after = null) {
    const seq = ++reads;
    let page;
    try {
      page = await api.threads({ status: "failed", after, limit: 50 });
    } catch (error) {
      problem.textContent = `The failed threads could not be read: ${error.message}`;
      return;
    }
    if (seq !== reads) return; // a newer read is on its way
    if (after === null) items.clear();
    for (const t of page.items) items.set(`${t.app}\0${t.thread}`, t);
    next = page.next;
    problem.textContent = "";
    render();
  }

  function onEvent(event) {
    // A run that failed adds a thread; one that finished (continued) may take one away.
    if (event.type === "run.failed" || event.type === "run.finished") load();
  }

  load();
  const element = h(
    "section",
    { className: "view" },
    h("nav", { className: "crumbs" }, h("a", { href: "#/" }, "← Pending questions")),
    h("h1", { tabindex: -1 }, "Failed threads ", count),
    h("p", { className: "muted" }, "A thread fails when a node raised, or when its continuation after a decision could not run. Fix the cause, then run the command shown."),
    problem,
    table,
    empty,
    more,
  );
  return { element, title: "Failed threads", onEvent, reload: () => load() };
}
