// The decision form of one pending question, and what the server said to it.
//
// A tool call (info.type "tool_approval") can be approved, rejected, run with edited arguments
// or answered instead of the tool; an approve() question approved or rejected; any other
// question answered with JSON, which only the server checks.
//
// A question marked `confirm` is not approved in one tap: Approve (and an edit, which runs the
// tool too) opens a second step that names what will run, and only its "Yes" sends the
// decision, with `confirmed: true`. The server refuses such an approval without it (428
// confirmation_required); should a page that did not know send one, the refusal opens the step.

import * as api from "./api.js";
import { ArgumentsEditor, diff, diffList } from "./args.js";
import { h, fill, jsonBlock, uuid, when } from "./dom.js";

let counter = 0;

/** A value as a person reads it in a call: text as it is, anything else as JSON. */
function shown(value) {
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** The call that will run, as one line: `execute(rm -rf /tmp/x)`, `send_email(to="a", body="b")`. */
export function callText(tool, args) {
  const name = tool ?? "the tool";
  if (args === null || typeof args !== "object" || Array.isArray(args)) return `${name}(${JSON.stringify(args ?? null)})`;
  const entries = Object.entries(args);
  if (entries.length === 1) return `${name}(${shown(entries[0][1])})`;
  return `${name}(${entries.map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(", ")})`;
}

/**
 * The second step before a risky approval: a box that says what will run, with "Yes" and
 * "Cancel". `ask(what, yes, onYes, back)` shows it (`what`: nodes naming the action, `yes`:
 * the label of the button that sends, `back`: the control focused again on Cancel).
 */
function confirmBox() {
  const id = `confirm-${++counter}`;
  const heading = h("h3", { id: `${id}-title` }, "Confirm before it runs");
  const question = h("p", { className: "lead", id: `${id}-what` });
  const yes = h("button", { type: "button", className: "danger" }, "Yes");
  const cancel = h("button", { type: "button", className: "secondary" }, "Cancel");
  const element = h(
    "div",
    { className: "pane confirm", id, role: "alertdialog", "aria-labelledby": heading.id, "aria-describedby": question.id, hidden: true },
    heading,
    question,
    h("p", { className: "hint" }, "This question asks for a second step. Nothing is sent until you say yes."),
    h("div", { className: "buttons" }, yes, cancel),
  );
  let back = null;
  let onYes = null;
  function expanded(flag) {
    if (back?.hasAttribute("aria-controls")) back.setAttribute("aria-expanded", String(flag));
  }
  function close() {
    element.hidden = true;
    expanded(false);
  }
  yes.addEventListener("click", () => {
    close();
    onYes?.();
  });
  cancel.addEventListener("click", () => {
    close();
    back?.focus();
  });
  return {
    element,
    yes,
    close,
    ask(what, yesText, action, from) {
      fill(question, what);
      yes.textContent = yesText;
      onYes = action;
      back = from;
      element.hidden = false;
      expanded(true);
      // Cancel first: a second tap where Approve was must not approve.
      cancel.focus({ preventScroll: true });
      element.scrollIntoView?.({ block: "nearest" });
    },
  };
}

function textArea(label, hint) {
  const id = `text-${++counter}`;
  const input = h("textarea", { id, rows: 3 });
  const field = h("div", { className: "field" }, h("label", { for: id }, label), hint ? h("span", { className: "hint" }, hint) : null, input);
  return { input, field };
}

/**
 * The decision form for `item` (an InterruptView). `report(level, ...nodes)` shows the
 * outcome above it (level "success", "warning" or "error"; null clears); `sending(flag)` is
 * told when a decision leaves and when its answer is in; `recorded(result)` of a recorded
 * decision; `reload()` reads the question again.
 */
export function decisionPanel(item, { me, report, recorded, sending, reload }) {
  const heading = h("h2", { id: `decide-${item.id}` }, "Your decision");
  const section = h("section", { className: "card decide", "aria-labelledby": heading.id }, heading);
  if (me.role === "viewer") {
    section.append(
      h(
        "p",
        { className: "note" },
        `You are signed in as ${me.name}, a viewer: you can read questions but not decide them. `,
        "An administrator can give you the approver role.",
      ),
    );
    return section;
  }
  if (me.four_eyes) {
    section.append(h("p", { className: "hint" }, "Four-eyes rule: a run you started must be decided by someone else."));
  }

  const controls = [];
  let busy = false;
  let unanswered = null; // {key, body} of a send whose answer never came: resent with its key

  const generalError = h("p", { className: "error", role: "alert" });

  /**
   * Send `answer`; `confirmed` when the person went through the second step. `confirm()`
   * opens that step, should the server ask for it (428).
   */
  async function send(answer, reason, errorEl = generalError, { confirmed = false, confirm = null } = {}) {
    if (busy) return;
    busy = true;
    sending(true);
    for (const c of controls) c.disabled = true;
    errorEl.textContent = "";
    generalError.textContent = "";
    report(null);
    const fields = { answer, payload_hash: item.payload_hash, reason: reason || null };
    if (confirmed) fields.confirmed = true;
    const body = JSON.stringify(fields);
    const key = unanswered?.body === body ? unanswered.key : uuid();
    try {
      const result = await api.decide(item.id, body, key, (n) =>
        report("warning", `No answer from the server yet; sending again (attempt ${n + 1})…`),
      );
      unanswered = null;
      recorded(result);
    } catch (error) {
      unanswered = error.status === 0 ? { key, body } : null;
      refused(error, errorEl, confirm);
    } finally {
      busy = false;
      sending(false);
      for (const c of controls) c.disabled = false;
      refreshEdit?.();
    }
  }

  function refused(error, errorEl, confirm) {
    const b = error.body ?? {};
    if (error.status === 428 || b.error === "confirmation_required") {
      errorEl.textContent =
        "Not recorded: this question must be confirmed before it is approved. " +
        (confirm ? "Check what will run below, then say yes." : `The server said: ${b.message ?? error.message}`);
      confirm?.();
    } else if (error.status === 422) {
      errorEl.textContent = `The server refused this answer: ${b.message ?? error.message}`;
    } else if (error.status === 409 && b.error === "already_decided") {
      const d = b.decision ?? {};
      const at = d.decided_at ? when(d.decided_at) : "an earlier time";
      report("error", h("strong", {}, `This question was already decided by ${d.actor ?? "someone"} at ${at}.`), " Your decision was not recorded.");
      reload();
    } else if (error.status === 409) {
      report("error", `Not recorded: ${b.message ?? error.message}`);
      if (b.error === "not_pending") reload();
    } else if (error.status === 412) {
      report(
        "warning",
        "The question changed since you opened it, so your decision was not recorded. ",
        h("button", { type: "button", className: "secondary", onclick: () => reload(true) }, "Show the question as it is now"),
      );
    } else if (error.status === 403) {
      report("error", `Not allowed: ${b.message ?? error.message}`);
    } else if (error.status === 429) {
      const wait = error.retryAfter ?? 1;
      report("error", `Too many decisions in a short time. Try again in ${wait} s.`);
    } else if (error.status === 0) {
      report(
        "error",
        "The server could not be reached, so the decision may not have been recorded. ",
        "Send it again when the connection is back: it goes with the same key, so it cannot count twice.",
      );
    } else if (error.status !== 401) {
      report("error", `The server refused the decision: ${b.message ?? error.message}`);
    }
  }

  const actions = h("div", { className: "actions", role: "group", "aria-label": "Decide" });
  const panes = h("div", { className: "panes" });

  function button(text, onclick, className = "secondary", type = "button") {
    const b = h("button", { type, className, onclick }, text);
    controls.push(b);
    return b;
  }

  /** A button that opens `pane` (and closes the others). */
  function opener(text, pane) {
    pane.hidden = true;
    pane.id = `pane-${++counter}`;
    const b = button(text, () => {
      const open = pane.hidden;
      for (const p of panes.children) p.hidden = true;
      for (const other of actions.querySelectorAll("[aria-controls]")) other.setAttribute("aria-expanded", "false");
      pane.hidden = !open;
      b.setAttribute("aria-expanded", String(open));
      const first = pane.querySelector(".editor-body :is(input, textarea, select)") ?? pane.querySelector("textarea, input, select");
      if (open) first?.focus();
    });
    b.setAttribute("aria-controls", pane.id);
    b.setAttribute("aria-expanded", "false");
    panes.append(pane);
    return b;
  }

  function rejectPane(hint, answer) {
    const why = textArea("Reason", hint);
    const error = h("p", { className: "error", role: "alert" });
    const pane = h(
      "form",
      { className: "pane", onsubmit: (e) => (e.preventDefault(), send(answer(why.input.value.trim()), why.input.value.trim(), error)) },
      why.field,
      error,
      h("div", { className: "buttons" }, button("Reject", null, "danger", "submit")),
    );
    return pane;
  }

  let refreshEdit = null;
  const info = item.info && typeof item.info === "object" ? item.info : {};

  const risky = item.confirm === true;
  // The approval's second step (used for a question marked `confirm`, or when the server asks).
  const approveBox = confirmBox();
  controls.push(approveBox.yes);

  /** An Approve button: one tap, or with `confirm` the second step naming `what` first. */
  function approveButton(answer, what) {
    const approveIt = (confirmed) =>
      send(answer, null, generalError, { confirmed, confirm: () => askApproval() });
    const b = button(risky ? "Approve…" : "Approve", () => (risky ? askApproval() : approveIt(false)), "primary");
    function askApproval() {
      for (const p of panes.children) if (p !== approveBox.element) p.hidden = true;
      for (const other of actions.querySelectorAll("[aria-controls]")) other.setAttribute("aria-expanded", "false");
      approveBox.ask(what(), "Yes, approve", () => approveIt(true), b);
    }
    if (risky) {
      b.setAttribute("aria-controls", approveBox.element.id);
      b.setAttribute("aria-expanded", "false");
    }
    panes.append(approveBox.element);
    return b;
  }

  if (info.type === "tool_approval") {
    actions.append(
      approveButton({ action: "approve" }, () => ["Run ", h("code", { className: "run" }, callText(info.tool, info.arguments)), "?"]),
    );
    actions.append(
      opener(
        "Reject…",
        rejectPane("The agent is told this instead of the tool's result; it is kept in the audit trail.", (why) =>
          why ? { action: "reject", message: why } : { action: "reject" },
        ),
      ),
    );

    // Edit: the form from the tool's schema, and what it changes, before anything is sent.
    const original = info.arguments ?? {};
    const changes = h("div", { className: "changes", "aria-live": "polite" });
    const editError = h("p", { className: "error", role: "alert" });
    const editWhy = h("input", { type: "text", id: `why-${++counter}` });
    const submit = button(risky ? "Run with the edited arguments…" : "Run with the edited arguments", null, "primary", "submit");
    const editBox = confirmBox();
    controls.push(editBox.yes);
    const editor = new ArgumentsEditor(info.schema, original, () => refreshEdit());
    refreshEdit = () => {
      const now = editor.value();
      if (!now.ok) {
        fill(changes, h("p", { className: "error" }, now.problem));
        submit.disabled = true;
        return;
      }
      const changed = diff(original, now.arguments);
      fill(changes, diffList(changed));
      submit.disabled = busy || changed.length === 0;
    };
    const editPane = h(
      "form",
      {
        className: "pane",
        "aria-label": "Edit the arguments",
        onsubmit: (e) => {
          e.preventDefault();
          const now = editor.value();
          if (!now.ok) return;
          const edited = { action: "edit", arguments: now.arguments };
          const sendIt = (confirmed) =>
            send(edited, editWhy.value.trim(), editError, { confirmed, confirm: () => askEdit(now.arguments, sendIt) });
          if (risky) askEdit(now.arguments, sendIt);
          else sendIt(false);
        },
      },
      h("h3", {}, `Arguments for ${info.tool ?? "the tool"}`),
      editor.element,
      h("h3", {}, "Changes"),
      changes,
      h("div", { className: "field" }, h("label", { for: editWhy.id }, "Reason (optional, kept in the audit trail)"), editWhy),
      editError,
      h("div", { className: "buttons" }, submit),
      editBox.element,
    );
    function askEdit(args, sendIt) {
      editBox.ask(["Run ", h("code", { className: "run" }, callText(info.tool, args)), "?"], "Yes, run it", () => sendIt(true), submit);
    }
    // An edit made after the step opened is not the one the step names.
    editor.element.addEventListener("input", () => editBox.close());
    refreshEdit();
    actions.append(opener("Edit…", editPane));

    const said = textArea("Answer", "The agent gets this as the tool's result; the tool does not run.");
    const respondError = h("p", { className: "error", role: "alert" });
    const respond = button("Send the answer", null, "primary", "submit");
    const respondPane = h(
      "form",
      {
        className: "pane",
        onsubmit: (e) => {
          e.preventDefault();
          if (!said.input.value.trim()) {
            respondError.textContent = "Write the answer the agent should get.";
            return;
          }
          send({ action: "respond", content: said.input.value }, null, respondError);
        },
      },
      said.field,
      respondError,
      h("div", { className: "buttons" }, respond),
    );
    actions.append(opener("Respond…", respondPane));
  } else if (info.type === "approval") {
    actions.append(approveButton(true, () => `Approve “${info.question ?? item.summary ?? "this question"}”?`));
    actions.append(opener("Reject…", rejectPane("Kept in the audit trail.", () => false)));
  } else {
    const answer = textArea("Answer (JSON)", "The server checks it against the schema below.");
    answer.input.classList.add("code");
    answer.input.rows = 6;
    const why = h("input", { type: "text", id: `why-${++counter}` });
    const error = h("p", { className: "error", role: "alert" });
    const sendButton = button(risky ? "Send the answer…" : "Send the answer", null, "primary", "submit");
    const answerBox = confirmBox();
    controls.push(answerBox.yes);
    const form = h(
      "form",
      {
        className: "pane",
        onsubmit: (e) => {
          e.preventDefault();
          let value;
          try {
            value = JSON.parse(answer.input.value);
          } catch (problem) {
            error.textContent = `This is not JSON: ${problem.message}. Text goes in double quotes.`;
            return;
          }
          const sendIt = (confirmed) => send(value, why.value.trim(), error, { confirmed, confirm: () => askAnswer(value, sendIt) });
          if (risky) askAnswer(value, sendIt);
          else sendIt(false);
        },
      },
      answer.field,
      item.answer_schema
        ? h("details", {}, h("summary", {}, "What the answer must look like"), jsonBlock(item.answer_schema, "The answer's schema"))
        : null,
      h("div", { className: "field" }, h("label", { for: why.id }, "Reason (optional, kept in the audit trail)"), why),
      error,
      h("div", { className: "buttons" }, sendButton),
      answerBox.element,
    );
    function askAnswer(value, sendIt) {
      answerBox.ask(["Send ", h("code", { className: "run" }, JSON.stringify(value)), "?"], "Yes, send it", () => sendIt(true), sendButton);
    }
    answer.input.addEventListener("input", () => answerBox.close());
    panes.append(form);
  }

  section.append(actions, generalError, panes);
  return section;
}
