// One question: what it asks, where it comes from, its thread, its audit trail, and the
// decision form while it waits. Kept current by the event stream.

import * as api from "./api.js";
import { auditList, answerText, editsOf, messageList, stateBlock, statusBadge } from "./context.js";
import { diffList } from "./args.js";
import { decisionPanel } from "./decide.js";
import { h, fill, jsonBlock, liveTime, when } from "./dom.js";

const INTERRUPT_STATUS = {
  pending: "waiting for a decision",
  resolved: "decided",
  expired: "expired",
  cancelled: "withdrawn",
};

function facts(pairs) {
  return h(
    "dl",
    { className: "facts" },
    pairs.filter(([, v]) => v !== null && v !== undefined && v !== "").map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]),
  );
}

function card(title, ...children) {
  return h("section", { className: "card" }, h("h2", {}, title), children);
}

/** What the question asks, by its kind. */
function asked(item, decision) {
  const info = item.info && typeof item.info === "object" ? item.info : null;
  if (info?.type === "tool_approval") {
    const edit = decision?.answer?.action === "edit" ? decision.answer : null;
    const by = decision?.actor ? `edited by ${decision.actor}` : "edited";
    return card(
      "The call",
      edit ? h("p", {}, h("span", { className: "badge edited" }, by)) : null,
      facts([
        ["Tool", h("code", {}, info.tool)],
        ["What it does", info.description],
        ["Asked by", info.agent],
        ["Rule", info.rule],
      ]),
      h("h3", {}, edit ? "Arguments asked for" : "Arguments"),
      jsonBlock(info.arguments, "The call's arguments"),
      edit ? [h("h3", {}, "Edited arguments (what the call runs with)"), jsonBlock(edit.arguments, "The edited arguments")] : null,
    );
  }
  if (info?.type === "approval") {
    return card(
      "The question",
      h("p", { className: "lead" }, info.question),
      info.details !== null && info.details !== undefined ? [h("h3", {}, "Details"), jsonBlock(info.details, "Details")] : null,
    );
  }
  return card("The question", jsonBlock(item.info, "What the question holds"));
}

function decided(detail) {
  const d = detail.decision;
  const status = detail.interrupt.status;
  if (!d) {
    const why = status === "expired" ? "Its deadline passed before anyone decided." : "It was withdrawn before anyone decided.";
    return card("Decision", h("p", {}, why));
  }
  return card(
    "Decision",
    h("p", { className: "lead" }, h("strong", {}, d.actor ?? "Someone"), ` decided: ${answerText(d.answer)}`),
    facts([
      ["When", when(d.decided_at)],
      ["Reason", d.reason],
    ]),
    Array.isArray(d.details?.diff) ? [h("h3", {}, "What the edit changed"), diffList(d.details.diff)] : null,
    h("details", {}, h("summary", {}, "The answer as sent"), jsonBlock(d.answer, "The answer")),
  );
}

/** The view of interrupt `id`. */
export function detailView(id, { me }) {
  const title = h("h1", { tabindex: -1 }, "Question");
  const banner = h("div", { className: "banner", role: "status", hidden: true });
  const main = h("div", { className: "main-column" });
  const aside = h("div", { className: "side-column" });
  const threadCard = h("section", { className: "card thread" });
  let detail = null;
  let mine = null; // the result of the decision this page recorded
  let sending = false; // a decision from this page is on its way
  let threadSeq = 0; // the newest read of the thread that has been shown
  let reads = 0; // reads of the thread's state asked for (by number, to drop late answers)
  let panel = null; // the decision form, kept while the question stays the same

  function report(level, ...nodes) {
    if (!level) {
      banner.hidden = true;
      fill(banner);
      return;
    }
    banner.className = `banner ${level}`;
    banner.setAttribute("aria-live", level === "error" ? "assertive" : "polite");
    fill(banner, nodes);
    banner.hidden = false;
  }

  function showThread(seq, { status, messages, values }) {
    if (seq < threadSeq) return; // an older read answered late
    threadSeq = seq;
    if (mine) outcome(status);
    const t = detail.interrupt;
    fill(
      threadCard,
      h("h2", {}, "Thread"),
      facts([
        ["Thread", h("a", { href: `#/threads/${encodeURIComponent(t.thread)}` }, t.thread)],
        ["Status", statusBadge(status, "thread-status")],
      ]),
      h("h3", {}, "Recent messages"),
      messageList(messages, editsOf(detail.audit)),
      stateBlock(values),
    );
  }

  async function refreshThread() {
    if (!detail) return;
    const seq = ++reads;
    try {
      const t = await api.thread(detail.interrupt.thread, detail.interrupt.app);
      showThread(seq, t);
    } catch {
      // the next event tries again
    }
  }

  /** The decision form; the one shown already while the question is unchanged (keeps edits). */
  function form(item) {
    if (panel?.hash !== item.payload_hash) {
      const element = decisionPanel(item, {
        me,
        report,
        recorded,
        sending: (flag) => (sending = flag),
        reload: (changed) => load(changed),
      });
      panel = { hash: item.payload_hash, element };
    }
    return panel.element;
  }

  function render(seq) {
    const item = detail.interrupt;
    document.title = `${item.summary || "Question"} · interlock`;
    fill(title, item.summary || "Question");
    const status = h("span", { className: `badge interrupt-${item.status}` }, INTERRUPT_STATUS[item.status] ?? item.status);
    const deadline = item.deadline ? liveTime(item.deadline, "deadline") : null;
    fill(
      main,
      h(
        "p",
        { className: "status-line" },
        status,
        deadline && item.status === "pending" ? [" · deadline ", deadline] : null,
        item.approvals > 1
          ? ` · ${(item.approved_by ?? []).length} of ${item.approvals} distinct approvals` +
              ((item.approved_by ?? []).length ? ` (${item.approved_by.join(", ")})` : "")
          : null,
        item.authority ? h("span", { className: "authority" }, ` · ${item.authority.text}`) : null,
      ),
      asked(item, detail.decision),
      item.status === "pending" ? form(item) : decided(detail),
    );
    const where = card(
      "Where it comes from",
      facts([
        ["App", item.app],
        ["Address", h("code", {}, item.address)],
        ["Key", item.key],
        ["Started by", detail.started_by],
        ["Asked", [when(item.created_at), " (", liveTime(item.created_at, "ago"), ")"]],
        ["Deadline", item.deadline ? [when(item.deadline), " (", liveTime(item.deadline, "deadline"), ")"] : "none"],
      ]),
    );
    showThread(seq, { status: detail.thread_status, messages: detail.messages, values: detail.values });
    fill(aside, where, threadCard, card("Audit trail", auditList(detail.audit)));
  }

  async function load(clear = false) {
    const seq = ++reads;
    try {
      detail = await api.interrupt(id);
    } catch (error) {
      const why =
        error.status === 404
          ? "There is no such question. It may belong to a server that no longer serves it."
          : `The question could not be read: ${error.message}`;
      fill(title, "Question not found");
      fill(main, h("p", { className: "error", role: "alert" }, why), h("p", {}, h("a", { href: "#/" }, "Back to the pending questions")));
      return;
    }
    if (clear) report(null);
    render(seq);
  }

  function recorded(result) {
    mine = result;
    outcome(null);
    load();
  }

  /** What became of this page's decision, and of the run since (thread `status`). */
  function outcome(status) {
    const said = mine.replayed
      ? "Your decision was recorded (an earlier attempt reached the server; it counts once)."
      : mine.decision.final === false
        ? "Your approval was counted."
        : "Your decision was recorded.";
    // The run may end before the decision's answer arrives, or after: whichever read of the
    // thread sees the end says so.
    let then;
    if (mine.decision.final === false) then = "The question waits for more approvals.";
    else if (status === "done") then = "The run finished.";
    else if (status === "failed") then = "The run failed afterwards; see the thread.";
    else if (mine.continued || mine.replayed) then = "The run continues…";
    else then = "The run continues when a worker picks it up.";
    report(status === "failed" ? "error" : "success", h("strong", {}, said), " ", then);
  }

  function onEvent(event) {
    if (!detail) return;
    const item = detail.interrupt;
    if (event.interrupt_id === id && event.type !== "interrupt.created") {
      if (!((mine || sending) && event.actor === me.name)) {
        const what =
          event.type === "interrupt.decided"
            ? `${event.actor ?? "Someone"} decided this question just now.`
            : event.type === "interrupt.expired"
              ? "The deadline passed: this question expired."
              : "This question was withdrawn.";
        report("warning", what);
      }
      load();
      return;
    }
    if (event.thread !== item.thread || (event.app && event.app !== item.app)) return;
    refreshThread();
  }

  load();
  const element = h(
    "article",
    { className: "view" },
    h("nav", { className: "crumbs" }, h("a", { href: "#/" }, "← Pending questions")),
    title,
    banner,
    h("div", { className: "columns" }, main, aside),
  );
  return { element, title: "Question", onEvent, reload: () => load() };
}
