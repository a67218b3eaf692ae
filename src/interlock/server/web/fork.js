// Forking a thread from one of its checkpoints (admins): the state at that checkpoint in a
// JSON editor, an optional node to fork as, the new thread's id, and whether to run it.
//
// Only the keys whose value the editor changed are sent, each whole (`values` replaces a key's
// value). The server checks them against the state's schema and answers 422 with the problems,
// writing nothing; they are listed under the editor.

import * as api from "./api.js";
import { h, fill, pretty } from "./dom.js";

let forms = 0;

function hex(n) {
  const bytes = crypto.getRandomValues(new Uint8Array(Math.ceil(n / 2)));
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("").slice(0, n);
}

function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** What the editor's text asks for: {values, changed} or {problem}, against the state `before`. */
export function editsOf(text, before) {
  let after;
  try {
    after = JSON.parse(text);
  } catch (error) {
    return { problem: `This is not JSON: ${error.message}` };
  }
  if (!isObject(after)) return { problem: "The state must be a JSON object: one member per key of the state." };
  const removed = Object.keys(before).filter((key) => !(key in after));
  if (removed.length) {
    return { problem: `A fork replaces keys, it cannot remove them: put ${removed.join(", ")} back (give it an empty value instead).` };
  }
  const values = {};
  for (const [key, value] of Object.entries(after)) {
    if (JSON.stringify(value) !== JSON.stringify(before[key])) values[key] = value;
  }
  return { values, changed: Object.keys(values) };
}

/**
 * The form that forks thread `thread` (of app `app`) from timeline entry `entry`;
 * `onCancel()` closes it. On success it goes to the branch's Studio.
 */
export function forkForm({ thread, app, entry, onCancel }) {
  const n = ++forms;
  const ids = { editor: `fork-state-${n}`, node: `fork-node-${n}`, target: `fork-thread-${n}`, run: `fork-run-${n}` };
  const editor = h("textarea", { id: ids.editor, className: "code", rows: 16, spellcheck: "false", disabled: true, "aria-describedby": `${ids.editor}-said` });
  const said = h("p", { className: "note", id: `${ids.editor}-said`, role: "status" }, "Reading the state at this checkpoint…");
  const problems = h("div", { className: "problems", role: "alert" });
  const asNode = h("select", { id: ids.node, disabled: true }, h("option", { value: "" }, "None: carry on from where the checkpoint stands"));
  const target = h("input", { type: "text", id: ids.target, value: `${thread}-fork-${hex(6)}`, required: true, spellcheck: "false", autocomplete: "off" });
  const run = h("input", { type: "checkbox", id: ids.run });
  const submit = h("button", { type: "submit", className: "primary", disabled: true }, "Fork");
  let before = null;
  let edits = null;

  function check() {
    edits = editsOf(editor.value, before);
    submit.disabled = Boolean(edits.problem);
    said.className = edits.problem ? "error" : "note";
    if (edits.problem) said.textContent = edits.problem;
    else if (!edits.changed.length) said.textContent = "No changes: the branch starts with the same state.";
    else said.textContent = `Changed: ${edits.changed.join(", ")} (only these keys are sent, each replaced whole).`;
  }

  function showProblems(error) {
    const listed = Array.isArray(error.body?.problems) ? error.body.problems : [];
    fill(
      problems,
      h("p", { className: "error" }, `Not forked, nothing was written: ${error.message}`),
      listed.length
        ? h(
            "ul",
            { className: "problem-list", "aria-label": "What the state's schema refused" },
            listed.map((p) => h("li", {}, h("code", {}, p.path || "/"), ` ${p.message}`)),
          )
        : null,
    );
  }

  async function send(event) {
    event.preventDefault();
    check();
    if (edits.problem) return;
    const body = { checkpoint_id: entry.checkpoint_id, new_thread: target.value.trim(), run: run.checked, app };
    if (edits.changed.length) body.values = edits.values;
    if (asNode.value) body.as_node = asNode.value;
    submit.disabled = true;
    fill(problems);
    try {
      const made = await api.fork(thread, body);
      location.hash = `#/threads/${encodeURIComponent(made.thread)}/studio?app=${encodeURIComponent(made.app)}`;
    } catch (error) {
      if (error.code === "thread_exists") {
        fill(problems, h("p", { className: "error" }, `Not forked: a thread named ${body.new_thread} exists already. Choose another id for the branch.`));
        target.focus();
      } else if (error.status === 403) {
        fill(problems, h("p", { className: "error" }, `Not forked: ${error.message}`));
      } else {
        showProblems(error);
      }
      submit.disabled = false;
    }
  }

  async function load() {
    try {
      const [state, schema] = await Promise.all([api.checkpoint(thread, app, entry.checkpoint_id), api.schema(thread, app)]);
      before = isObject(state.values) ? state.values : {};
      editor.value = pretty(before);
      editor.disabled = false;
      for (const node of schema.nodes ?? []) asNode.append(h("option", { value: node }, node));
      asNode.disabled = false;
      check();
    } catch (error) {
      said.className = "error";
      said.textContent = `The state at this checkpoint could not be read: ${error.message}`;
    }
  }

  editor.addEventListener("input", check);
  load();
  return h(
    "form",
    { className: "fork-form", "aria-label": `Fork from step ${entry.step}`, onsubmit: send },
    h("p", { className: "muted" }, `From step ${entry.step}, checkpoint `, h("code", {}, entry.checkpoint_id), ". The thread itself is not changed."),
    h("div", { className: "field" }, h("label", { for: ids.editor }, "State (JSON)"), editor, said, problems),
    h(
      "div",
      { className: "field" },
      h("label", { for: ids.node }, "As node"),
      asNode,
      h("span", { className: "hint" }, "Plan the next steps as if this node had just written the state."),
    ),
    h("div", { className: "field" }, h("label", { for: ids.target }, "New thread"), target),
    h("div", { className: "field" }, h("label", { className: "choice", for: ids.run }, run, "Run it after forking")),
    h("div", { className: "buttons" }, submit, h("button", { type: "button", className: "secondary", onclick: onCancel }, "Cancel")),
  );
}
