// What surrounds a question: its thread's status and recent messages, and the audit trail.

import { diff, diffList } from "./args.js";
import { h, jsonBlock, liveTime, when } from "./dom.js";

const STATUS = {
  interrupted: "waiting for a decision",
  ready: "running",
  paused: "paused",
  done: "done",
  failed: "failed",
};

/** A thread's status as a badge a person can read. */
export function statusBadge(status, id) {
  const text = status ? STATUS[status] ?? status : "unknown";
  return h("span", { className: `badge status-${status ?? "unknown"}`, id, "data-status": status ?? "" }, text);
}

/** A decision's answer in words: "approve", "reject: <message>", "edit the arguments"... */
export function answerText(answer) {
  if (answer === true) return "approve";
  if (answer === false) return "reject";
  if (answer && typeof answer === "object" && typeof answer.action === "string") {
    if (answer.action === "reject" && answer.message) return `reject: “${answer.message}”`;
    if (answer.action === "respond") return `answer instead of the tool: “${answer.content}”`;
    if (answer.action === "edit") return "run with edited arguments";
    return answer.action;
  }
  return JSON.stringify(answer);
}

/** A call a person edited: the arguments asked for, those it runs with, and what changed. */
function editedCall(call, edit) {
  const by = edit.actor ? `edited by ${edit.actor}` : "edited";
  return h(
    "div",
    { className: "call edited", "data-call-id": call.id },
    "calls ",
    h("code", {}, call.name),
    " ",
    h("span", { className: "badge edited" }, by),
    h("h4", {}, "Arguments asked for"),
    jsonBlock(call.arguments, `Arguments ${call.name} was asked with`),
    h("h4", {}, "Edited arguments (what the call runs with)"),
    jsonBlock(edit.arguments, `Edited arguments of ${call.name}`),
    h("h4", {}, "What the edit changed"),
    diffList(diff(call.arguments, edit.arguments)),
  );
}

/**
 * The edits of tool calls in a thread's audit `entries`: "tool\0call id" -> {actor, arguments},
 * the last edit of each call (an edit a quorum asks about again may be edited again).
 */
export function editsOf(entries) {
  const edits = new Map();
  for (const e of entries ?? []) {
    const d = e.kind === "decision" && e.data && typeof e.data === "object" ? e.data : null;
    const callId = d?.details?.call_id;
    if (d?.answer?.action === "edit" && typeof callId === "string") {
      edits.set(`${d.details.tool}\0${callId}`, { actor: e.actor, arguments: d.answer.arguments });
    }
  }
  return edits;
}

function messageItem(m, edits) {
  const role = typeof m?.role === "string" ? m.role : "message";
  const who = m?.name && role !== "user" ? `${role} · ${m.name}` : role;
  const parts = [];
  if (typeof m?.content === "string" && m.content) parts.push(h("div", { className: "content" }, m.content));
  else if (m?.content !== undefined && m?.content !== null && m?.content !== "") parts.push(jsonBlock(m.content));
  for (const call of Array.isArray(m?.tool_calls) ? m.tool_calls : []) {
    const edit = edits.get(`${call?.name}\0${call?.id}`);
    parts.push(edit ? editedCall(call, edit) : h("div", { className: "call" }, "calls ", h("code", {}, call.name), jsonBlock(call.arguments, `Arguments of ${call.name}`)));
  }
  if (!parts.length && (!m || typeof m !== "object" || !("role" in m))) parts.push(jsonBlock(m));
  return h("li", { className: `message role-${role}` }, h("span", { className: "role" }, who), parts);
}

/** The recent messages of a thread, oldest first; calls in `edits` (from `editsOf`) marked edited. */
export function messageList(messages, edits = new Map()) {
  if (!messages?.length) return h("p", { className: "muted" }, "No messages in this thread.");
  return h("ol", { className: "messages", "aria-label": "Recent messages" }, messages.map((m) => messageItem(m, edits)));
}

/** The thread's state besides its messages, folded away when there is any. */
export function stateBlock(values) {
  const empty = values === null || values === undefined || (typeof values === "object" && !Object.keys(values).length);
  if (empty) return null;
  return h("details", { className: "state" }, h("summary", {}, "State"), jsonBlock(values, "The thread's state"));
}

/** What an audit `entry` says, in words (and a diff or reason where it has one). */
export function describe(entry) {
  const d = entry.data && typeof entry.data === "object" ? entry.data : {};
  const who = entry.actor ?? "someone";
  switch (entry.kind) {
    case "interrupt":
      return ["The question was asked"];
    case "decision": {
      const parts = [`${who} decided: ${answerText(d.answer)}`];
      if (d.reason) parts.push(h("div", { className: "reason" }, `Reason: ${d.reason}`));
      if (Array.isArray(d.details?.diff)) parts.push(diffList(d.details.diff));
      return parts;
    }
    case "approval":
      return [`${who} approved (${(d.approved_by ?? []).length} of ${d.approvals ?? "?"} approvals needed)`];
    case "expired":
      return ["The deadline passed; the question expired"];
    case "cancelled":
      return ["The question was withdrawn"];
    case "edit":
      return [`${who} edited the thread's state`];
    case "dropped":
      return [`Decisions were set aside (${who})`];
    case "effect_started":
      return [`Started ${d.name ?? "an outside call"}`];
    case "effect_retried":
      return [`Started ${d.name ?? "an outside call"} again`];
    case "effect_done":
      return [`${d.name ?? "An outside call"} finished`];
    case "effect_reconciled":
      return [`${d.name ?? "An outside call"}: its outcome was settled by ${who}`];
    case "thread_deleted":
      return [`${who} deleted the thread`];
    default:
      return [`${entry.kind}${entry.actor ? ` by ${entry.actor}` : ""}`];
  }
}

/** The audit trail: who did what, when. */
export function auditList(entries) {
  if (!entries?.length) return h("p", { className: "muted" }, "Nothing recorded yet.");
  return h(
    "ol",
    { className: "audit" },
    entries.map((e) =>
      h(
        "li",
        { "data-kind": e.kind },
        h("time", { datetime: new Date(e.at * 1000).toISOString() }, when(e.at)),
        " (",
        liveTime(e.at, "ago"),
        ")",
        h("div", { className: "what" }, describe(e)),
      ),
    ),
  );
}

const count = new Intl.NumberFormat("en");

/** "12,000 in · 3,000 out (1,000 cached)" for a tally of model calls. */
function tokens(t) {
  const cached = t.cached_tokens ? ` (${count.format(t.cached_tokens)} cached)` : "";
  return `${count.format(t.input_tokens)} in · ${count.format(t.output_tokens)} out${cached}`;
}

function cost(t) {
  return t.cost === null || t.cost === undefined ? "no price set" : `$${t.cost.toFixed(t.cost < 1 ? 4 : 2)}`;
}

/** What a thread's model calls used: this run, the whole thread, and by model. */
export function usageBlock(usage) {
  if (!usage) return h("p", { className: "muted" }, "No model usage to show: no model call reported any, or your access is limited to some tools.");
  const models = Object.entries(usage.models);
  return h(
    "div",
    { className: "usage" },
    h(
      "dl",
      { className: "facts" },
      h("dt", {}, "This run"),
      h("dd", { className: "usage-run" }, `${tokens(usage.run)} · ${usage.run.calls} calls · ${cost(usage.run)} · ${Math.round(usage.run_seconds)} s running`),
      h("dt", {}, "Whole thread"),
      h("dd", { className: "usage-thread" }, `${tokens(usage.thread)} · ${usage.thread.calls} calls · ${cost(usage.thread)}`),
    ),
    models.length
      ? h(
          "table",
          { className: "usage-models" },
          h("thead", {}, h("tr", {}, h("th", {}, "Model"), h("th", {}, "Tokens"), h("th", {}, "Calls"), h("th", {}, "Cost"))),
          h(
            "tbody",
            {},
            models.map(([name, t]) => h("tr", {}, h("td", {}, name), h("td", {}, tokens(t)), h("td", {}, String(t.calls)), h("td", {}, cost(t)))),
          ),
        )
      : null,
  );
}
