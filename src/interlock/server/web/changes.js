// What a step changed in a thread's state, as the server lists it (GET …/timeline and
// …/compare): [{path, op, old, new}] with `op` one of add, remove, change, append. A value
// too large to send whole comes folded: {"$folded": true, "preview": "…", "chars": n}.

import { h } from "./dom.js";

const count = new Intl.NumberFormat("en");

/** A change's path as a person reads it: `messages/3/content`, or `(the whole state)`. */
export function pathText(path) {
  return path?.length ? path.map(String).join("/") : "(the whole state)";
}

/** Whether `value` is a folded value: the start of its JSON and its length. */
export function isFolded(value) {
  return value !== null && typeof value === "object" && value.$folded === true;
}

/** A value of a change: its JSON, or the preview of a folded one and how long it is. */
export function valueOf(value, tag = "code") {
  if (isFolded(value)) {
    return h(
      tag,
      { className: "folded", title: `${count.format(value.chars)} characters, folded` },
      `${value.preview}…`,
      h("span", { className: "chars" }, ` (${count.format(value.chars)} characters)`),
    );
  }
  return h(tag, {}, JSON.stringify(value) ?? "null");
}

function items(n) {
  return n === 1 ? "1 item" : `${count.format(n)} items`;
}

function change(c) {
  const where = h("code", { className: "path" }, pathText(c.path));
  switch (c.op) {
    case "add":
      return h("li", { className: "add", "data-op": "add" }, where, " added: ", valueOf(c.new, "ins"));
    case "remove":
      return h("li", { className: "remove", "data-op": "remove" }, where, " removed: ", valueOf(c.old, "del"));
    case "append": {
      const added = Array.isArray(c.new) ? c.new : [c.new];
      return h(
        "li",
        { className: "append", "data-op": "append" },
        where,
        ` ${items(added.length)} appended`,
        typeof c.old === "number" ? ` after ${items(c.old)}` : "",
        ":",
        h("ul", { className: "appended" }, added.map((item) => h("li", {}, valueOf(item, "ins")))),
      );
    }
    default:
      return h(
        "li",
        { className: "change", "data-op": "change" },
        where,
        " ",
        valueOf(c.old, "del"),
        h("span", { "aria-hidden": "true" }, " → "),
        h("span", { className: "sr-only" }, " becomes "),
        valueOf(c.new, "ins"),
      );
  }
}

/** `changes` as a list a person can read; `empty` is said when there are none. */
export function changeList(changes, empty = "The state did not change.") {
  if (!changes?.length) return h("p", { className: "muted no-changes" }, empty);
  return h("ul", { className: "diff state-changes" }, changes.map(change));
}
