// Building the page: elements from data (text is never parsed as HTML), times and JSON.

/**
 * A new element. `attrs` sets properties for `on*` handlers, `hidden`, `disabled`, `value`,
 * `checked`, `className`; attributes otherwise. Children are nodes or text; null is skipped.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (["className", "hidden", "disabled", "value", "checked"].includes(name)) el[name] = value;
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
}

/** Replace everything inside `el` with `children`. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** `value` as indented JSON. */
export function pretty(value) {
  return JSON.stringify(value, null, 2) ?? "null";
}

/** A `<pre>` of `value` as indented JSON. */
export function jsonBlock(value, label) {
  return h("pre", { className: "json", tabindex: 0, "aria-label": label }, pretty(value));
}

const clock = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });

/** A Unix time (seconds) as a local date and time. */
export function when(seconds) {
  return clock.format(new Date(seconds * 1000));
}

/** A number of seconds for a person: "4 min 10 s", "2 h 5 min", "3 days". */
export function span(seconds) {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  const days = Math.floor(s / 86400);
  return days === 1 ? "1 day" : `${days} days`;
}

/** "3 min ago" for a past Unix time. */
export function ago(seconds) {
  const past = Date.now() / 1000 - seconds;
  return past < 5 ? "just now" : `${span(past)} ago`;
}

/** "in 4 min 10 s", or "passed 12 s ago", for a deadline. */
export function countdown(deadline) {
  const left = deadline - Date.now() / 1000;
  return left > 0 ? `in ${span(left)}` : `passed ${span(-left)} ago`;
}

/**
 * A `<time>` that keeps itself current: `kind` "ago" (a past time) or "deadline" (a
 * countdown). `tick()` updates every such element on the page.
 */
export function liveTime(seconds, kind) {
  const el = h("time", {
    datetime: new Date(seconds * 1000).toISOString(),
    title: when(seconds),
    "data-live": kind,
    "data-at": seconds,
  });
  render(el);
  return el;
}

function render(el) {
  const at = Number(el.dataset.at);
  if (el.dataset.live === "deadline") {
    el.textContent = countdown(at);
    el.classList.toggle("overdue", at <= Date.now() / 1000);
    el.classList.toggle("soon", at > Date.now() / 1000 && at - Date.now() / 1000 < 300);
  } else {
    el.textContent = ago(at);
  }
}

/** Bring every live time on the page up to date. */
export function tick() {
  for (const el of document.querySelectorAll("time[data-live]")) render(el);
}

/** A v4 UUID; `crypto.randomUUID` exists only on secure origins (HTTPS or loopback). */
export function uuid() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const hex = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
