// Editing a tool call's arguments: a form built from the tool's JSON schema, or the whole
// object as JSON, and what the edit changes.
//
// The form knows string, number, integer and boolean fields (and enums of them); every other
// field is a JSON text area. Nothing here checks the arguments against the schema: the server
// does, and its message is shown next to the form.

import { h, fill, pretty } from "./dom.js";

const SIMPLE = new Set(["string", "number", "integer", "boolean"]);

/** What changed from `before` to `after`: [{op, path, before, after}] with JSON-pointer paths. */
export function diff(before, after, path = "") {
  if (isObject(before) && isObject(after)) {
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
    return keys.flatMap((key) => {
      const where = `${path}/${key.replaceAll("~", "~0").replaceAll("/", "~1")}`;
      if (!(key in after)) return [{ op: "remove", path: where, before: before[key] }];
      if (!(key in before)) return [{ op: "add", path: where, after: after[key] }];
      return diff(before[key], after[key], where);
    });
  }
  if (JSON.stringify(before) === JSON.stringify(after)) return [];
  return [{ op: "replace", path: path || "/", before, after }];
}

function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** `changes` (from `diff`) as a list a person can read. */
export function diffList(changes) {
  if (!changes.length) return h("p", { className: "muted" }, "No changes yet.");
  return h(
    "ul",
    { className: "diff" },
    changes.map((c) =>
      h(
        "li",
        { className: c.op },
        h("code", {}, c.path),
        " ",
        c.op === "add" ? "added: " : c.op === "remove" ? "removed: " : "",
        c.op !== "add" ? h("del", {}, JSON.stringify(c.before)) : null,
        c.op === "replace" ? h("span", { "aria-hidden": "true" }, " → ") : null,
        c.op === "replace" ? h("span", { className: "sr-only" }, " becomes ") : null,
        c.op !== "remove" ? h("ins", {}, JSON.stringify(c.after)) : null,
      ),
    ),
  );
}

/** The kind of form control a property schema gets. */
function controlOf(schema) {
  if (!isObject(schema)) return "json";
  if (Array.isArray(schema.enum) && schema.enum.length) return "enum";
  return SIMPLE.has(schema.type) ? schema.type : "json";
}

let counter = 0;

/** One field of the form, with `read()` → {present, value} or {problem}. */
function field(name, schema, required, current) {
  const id = `arg-${++counter}`;
  const kind = controlOf(schema);
  const has = Object.hasOwn(current, name);
  const value = current[name];
  const hint = schema?.description
    ? h("span", { className: "hint", id: `${id}-hint` }, schema.description)
    : null;
  const described = hint ? `${id}-hint` : null;
  let control;
  let read;
  if (kind === "boolean" && required) {
    control = h("input", { type: "checkbox", id, checked: value === true, "aria-describedby": described });
    read = () => ({ present: true, value: control.checked });
  } else if (kind === "enum" || kind === "boolean") {
    const options = kind === "boolean" ? [true, false] : schema.enum;
    control = h(
      "select",
      { id, "aria-describedby": described },
      required ? null : h("option", { value: "" }, "(not set)"),
      options.map((o) => h("option", { value: JSON.stringify(o) }, typeof o === "string" ? o : JSON.stringify(o))),
    );
    control.value = has ? JSON.stringify(value) : "";
    read = () => (control.value === "" ? { present: false } : { present: true, value: JSON.parse(control.value) });
  } else if (kind === "number" || kind === "integer") {
    control = h("input", {
      type: "number",
      id,
      step: kind === "integer" ? "1" : "any",
      value: has && typeof value === "number" ? String(value) : "",
      "aria-describedby": described,
    });
    read = () => (control.value === "" ? { present: false } : { present: true, value: Number(control.value) });
  } else if (kind === "string" && (!has || typeof value === "string")) {
    const text = has ? value : "";
    const long = text.length > 40 || text.includes("\n");
    control = long
      ? h("textarea", { id, rows: Math.min(12, 2 + text.split("\n").length), "aria-describedby": described })
      : h("input", { type: "text", id, "aria-describedby": described });
    control.value = text;
    // An optional string left empty is left out, unless it was there, empty, all along.
    read = () =>
      required || control.value !== "" || (has && text === "" && control.value === "")
        ? { present: true, value: control.value }
        : { present: false };
  } else {
    control = h("textarea", { id, className: "code", rows: 4, "aria-describedby": described });
    control.value = has ? pretty(value) : "";
    read = () => {
      if (control.value.trim() === "") return { present: false };
      try {
        return { present: true, value: JSON.parse(control.value) };
      } catch {
        return { problem: `${name} is not valid JSON.` };
      }
    };
  }
  const label = h(
    "label",
    { for: id },
    h("code", {}, name),
    required ? h("span", { className: "required" }, " (required)") : null,
    kind === "json" ? h("span", { className: "hint" }, " as JSON") : null,
  );
  return { element: h("div", { className: "field" }, label, hint, control), read };
}

/** The form for the arguments of a call of a tool whose arguments follow `schema`. */
export class ArgumentsEditor {
  /** `onChange()` is called after every edit. */
  constructor(schema, original, onChange) {
    this.schema = isObject(schema) ? schema : {};
    this.original = isObject(original) ? original : {};
    this.onChange = onChange;
    this.mode = isObject(this.schema.properties) ? "fields" : "json";
    this.fields = [];
    this.body = h("div", { className: "editor-body" });
    this.problem = h("p", { className: "error", role: "alert" });
    const name = `mode-${++counter}`;
    this.radios = {};
    const radio = (mode, text) => {
      const input = h("input", { type: "radio", name, value: mode, checked: this.mode === mode, onchange: () => this.#switch(mode) });
      this.radios[mode] = input;
      return h("label", { className: "choice" }, input, text);
    };
    this.element = h(
      "div",
      { className: "editor", oninput: () => onChange(), onchange: () => onChange() },
      h("fieldset", { className: "modes" }, h("legend", {}, "Edit as"), radio("fields", "Fields"), radio("json", "JSON")),
      this.problem,
      this.body,
    );
    this.#build(this.original);
  }

  #build(current) {
    this.fields = [];
    if (this.mode === "json") {
      this.json = h("textarea", { className: "code", rows: 10, id: `args-${++counter}`, "aria-label": "Arguments as JSON" });
      this.json.value = pretty(current);
      fill(this.body, this.json);
      return;
    }
    const properties = this.schema.properties ?? {};
    const required = new Set(Array.isArray(this.schema.required) ? this.schema.required : []);
    // Every property of the schema, then any argument the schema does not name (kept as JSON).
    const names = [...Object.keys(properties), ...Object.keys(current).filter((k) => !(k in properties))];
    const rows = names.map((n) => {
      const made = field(n, properties[n], required.has(n), current);
      this.fields.push({ name: n, ...made });
      return made.element;
    });
    fill(this.body, rows);
  }

  #switch(mode) {
    const now = this.value();
    const refused = !now.ok
      ? `${now.problem} Fix it before switching.`
      : mode === "fields" && !isObject(now.arguments)
        ? "The arguments are not a JSON object, so they have no fields."
        : null;
    if (refused) {
      this.problem.textContent = refused;
      this.radios[this.mode].checked = true;
      return;
    }
    this.problem.textContent = "";
    this.mode = mode;
    this.#build(now.arguments);
    this.onChange();
  }

  /** The edited arguments: {ok: true, arguments} or {ok: false, problem}. */
  value() {
    if (this.mode === "json") {
      try {
        return { ok: true, arguments: JSON.parse(this.json.value) };
      } catch (error) {
        return { ok: false, problem: `The arguments are not valid JSON (${error.message}).` };
      }
    }
    const out = {};
    for (const f of this.fields) {
      const got = f.read();
      if (got.problem) return { ok: false, problem: got.problem };
      if (got.present) out[f.name] = got.value;
    }
    return { ok: true, arguments: out };
  }
}
