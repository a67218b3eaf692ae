// One checkpoint of a thread's timeline (GET …/timeline): its step, where it came from, what
// ran and what that changed, and what people and outside calls did until the next one.

import { changeList } from "./changes.js";
import { describe, statusBadge } from "./context.js";
import { h, liveTime, when } from "./dom.js";

const SOURCES = {
  input: "run started",
  loop: "step",
  update: "state edited",
  fork: "fork",
  resume: "resumed",
};

/** What an interrupt entry of a pause says (its data's `kind`): the run stopped, nobody asked. */
const PAUSES = {
  before: "The run paused at a breakpoint",
  after: "The run paused at a breakpoint",
  external: "The run was paused on request",
};

/** What an interrupt entry of a question of another kind than a node's own says. */
const QUESTIONS = {
  reconcile: "An outside call's outcome is unknown: a person was asked to settle it",
};

/** The link to thread `thread`'s Studio (in app `app`). */
export function studioLink(thread, app, text = thread) {
  const query = app ? `?app=${encodeURIComponent(app)}` : "";
  return h("a", { href: `#/threads/${encodeURIComponent(thread)}/studio${query}`, className: "thread-link" }, text);
}

function shortId(checkpoint) {
  return typeof checkpoint === "string" && checkpoint.length > 14 ? `${checkpoint.slice(0, 14)}…` : String(checkpoint);
}

/**
 * A fork entry of the audit log, from the side of thread `thread`: where it came from, or went.
 * It is listed under the checkpoint that was the thread's newest when the fork was made, which
 * need not be the one forked from: `at` is the checkpoint it is listed under.
 */
function forkText(event, thread, app, at) {
  const d = event.data && typeof event.data === "object" ? event.data : {};
  const who = event.actor ?? "someone";
  const how = [d.as_node ? ` as node ${d.as_node}` : "", d.edited?.length ? ` with ${d.edited.join(", ")} edited` : ""].join("");
  if (d.branch?.thread && d.branch.thread !== thread) {
    const from = d.source?.checkpoint === at ? "from here" : `from checkpoint ${shortId(d.source?.checkpoint)}`;
    return [`${who} forked a branch ${from}${how}: `, studioLink(d.branch.thread, app)];
  }
  const source = d.source ?? {};
  return [`${who} forked this thread from `, studioLink(source.thread ?? "?", app), ` at checkpoint ${shortId(source.checkpoint)}${how}`];
}

function eventItem(event, thread, app, at) {
  let what;
  if (event.kind === "fork") what = forkText(event, thread, app, at);
  else if (event.kind === "interrupt" && typeof event.data?.interrupt === "string") {
    const where = event.data.address ? ` at ${event.data.address}` : "";
    const asked = PAUSES[event.data.kind] ?? QUESTIONS[event.data.kind] ?? "A question was asked";
    what = [h("a", { href: `#/interrupts/${encodeURIComponent(event.data.interrupt)}` }, asked), where];
  } else what = describe(event);
  return h(
    "li",
    { "data-kind": event.kind },
    h("time", { datetime: new Date(event.at * 1000).toISOString(), title: when(event.at) }, when(event.at)),
    h("div", { className: "what" }, what),
  );
}

/** What the checkpoint's metadata says about how it came to be: a run, a fork, a failure, a pause. */
function origin(entry, app) {
  const m = entry.metadata && typeof entry.metadata === "object" ? entry.metadata : {};
  const lines = [];
  const from = m.forked_from;
  if (from && typeof from === "object") {
    const details = [m.as_node ? `as node ${m.as_node}` : null, m.edited?.length ? `${m.edited.join(", ")} edited` : null].filter(Boolean);
    lines.push(
      h(
        "p",
        { className: "forked-from" },
        "Forked from ",
        studioLink(from.thread, app),
        ` at step ${from.step ?? "?"}`,
        m.actor ? ` by ${m.actor}` : "",
        details.length ? ` (${details.join("; ")})` : "",
      ),
    );
  } else if (entry.source === "input" && m.started_by) {
    lines.push(h("p", { className: "started-by" }, `Run started by ${m.started_by}`));
  } else if (entry.source === "update" && m.actor) {
    lines.push(h("p", { className: "started-by" }, `State edited by ${m.actor}`));
  }
  if (m.error) lines.push(h("pre", { className: "json failure-error", tabindex: 0 }, String(m.error)));
  if (entry.status === "paused") {
    const before = entry.next?.length ? ` before ${entry.next.join(", ")}` : "";
    lines.push(h("p", { className: "paused" }, `Paused${before}${m.reason ? `: ${m.reason}` : ""}`));
  }
  if (entry.interrupts?.length) {
    const waits =
      entry.status === "paused"
        ? "Resume it to go on: "
        : entry.interrupts.length === 1
          ? "Waits on a question: "
          : `Waits on ${entry.interrupts.length} questions: `;
    lines.push(
      h(
        "p",
        { className: "waits" },
        waits,
        entry.interrupts.map((id, n) => [n ? ", " : "", h("a", { href: `#/interrupts/${encodeURIComponent(id)}` }, shortId(id))]),
      ),
    );
  }
  return lines;
}

function ranList(ran) {
  if (!ran?.length) return null;
  return h(
    "ul",
    { className: "ran", "aria-label": "Nodes that ran" },
    ran.map((r) =>
      h("li", {}, h("code", {}, r.node), r.keys?.length ? [" wrote ", r.keys.map((k, n) => [n ? ", " : "", h("code", {}, k)])] : " wrote nothing"),
    ),
  );
}

/**
 * The `<li>` of timeline entry `entry` of thread `thread`. `picked` says whether it is picked
 * for comparison, `onPick(entry, checked)` is called when that changes, and `onFork(entry)`
 * (admins only, else null) opens the fork form from it.
 */
export function entryItem(entry, { thread, app, picked, onPick, onFork }) {
  const label = `Step ${entry.step}`;
  const box = h("input", {
    type: "checkbox",
    className: "pick",
    checked: picked,
    "aria-label": `Compare step ${entry.step} (${entry.checkpoint_id})`,
    onchange: (event) => onPick(entry, event.currentTarget.checked),
  });
  return h(
    "li",
    { className: "entry", "data-checkpoint": entry.checkpoint_id, "data-step": entry.step, "data-source": entry.source },
    h(
      "div",
      { className: "entry-head" },
      h("label", { className: "choice pick-label", title: "Pick two entries to compare them" }, box, h("span", { className: "sr-only" }, "Compare")),
      h("h3", {}, label),
      h("span", { className: `badge source source-${entry.source}` }, SOURCES[entry.source] ?? entry.source),
      statusBadge(entry.status),
      h("span", { className: "muted at" }, liveTime(entry.created_at, "ago")),
      onFork
        ? h(
            "button",
            { type: "button", className: "secondary small fork-button", "aria-label": `Fork from step ${entry.step}`, onclick: () => onFork(entry) },
            "Fork from here…",
          )
        : null,
    ),
    origin(entry, app),
    ranList(entry.ran),
    entry.changes?.length ? changeList(entry.changes) : null,
    entry.events?.length ? h("ol", { className: "audit events", "aria-label": `What happened after step ${entry.step}` }, entry.events.map((e) => eventItem(e, thread, app, entry.checkpoint_id))) : null,
  );
}
