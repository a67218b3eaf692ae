// The server's event stream (GET v1/events), read with fetch so that it can carry the
// Authorization header (EventSource cannot), and parsed as Server-Sent Events by hand. Signed
// in with single sign-on, the browser's cookie goes with it instead.
//
// After a drop the stream reconnects with the Last-Event-ID header, and the server sends
// what happened in between: nothing is missed. A first connection (no id yet) cannot know
// what happened before it, so `onOpen` tells the page to read the inbox afresh.

import { credentials, hooks } from "./api.js";

/** Server-Sent Events frames from text that arrives in arbitrary pieces. */
export class FrameParser {
  constructor() {
    this.lastId = "";
    this.retry = null;
    this.#reset();
    this.rest = "";
  }

  #reset() {
    this.type = "";
    this.data = [];
  }

  /** Feed the next piece of text; returns the events it completes ({id, type, data}). */
  push(text) {
    const out = [];
    const buffer = this.rest + text;
    // A CR at the very end may be the first half of a CRLF: wait for the next piece.
    const cut = buffer.endsWith("\r") ? buffer.length - 1 : buffer.length;
    const lines = buffer.slice(0, cut).split(/\r\n|\r|\n/);
    this.rest = lines.pop() + buffer.slice(cut);
    for (const line of lines) {
      const event = this.#line(line);
      if (event) out.push(event);
    }
    return out;
  }

  #line(line) {
    if (line === "") {
      const event = this.data.length
        ? { id: this.lastId, type: this.type || "message", data: this.data.join("\n") }
        : null;
      this.#reset();
      return event;
    }
    if (line.startsWith(":")) return null; // a comment: the server's keep-alive
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") this.data.push(value);
    else if (field === "event") this.type = value;
    else if (field === "id" && !value.includes("\0")) this.lastId = value;
    else if (field === "retry" && /^\d+$/.test(value)) this.retry = Number(value);
    return null;
  }
}

const SILENCE_MS = 45_000; // the server sends a keep-alive well within this

/**
 * The event stream, kept open: `onEvent(event)` for each server event (its JSON data),
 * `onState("connecting" | "live" | "reconnecting")`, `onOpen({fresh})` on each connection.
 */
export class EventStream {
  #stopped = false;
  #abort = null;

  constructor({ onEvent, onState = () => {}, onOpen = () => {} }) {
    this.onEvent = onEvent;
    this.onState = onState;
    this.onOpen = onOpen;
    this.lastId = "";
    this.retry = 2000;
  }

  start() {
    this.#run();
    return this;
  }

  stop() {
    this.#stopped = true;
    this.#abort?.abort();
  }

  async #run() {
    let failures = 0;
    this.onState("connecting");
    while (!this.#stopped) {
      const ok = await this.#connect();
      if (this.#stopped) return;
      failures = ok ? 0 : failures + 1;
      this.onState("reconnecting");
      const wait = Math.min(30_000, this.retry * 2 ** Math.min(failures, 4));
      await new Promise((done) => setTimeout(done, wait));
    }
  }

  /** One connection, read until it ends; true if it connected. */
  async #connect() {
    const abort = new AbortController();
    this.#abort = abort;
    let silence = setTimeout(() => abort.abort(), SILENCE_MS);
    const headers = { Accept: "text/event-stream", ...credentials() };
    const resumed = Boolean(this.lastId);
    if (resumed) headers["Last-Event-ID"] = this.lastId;
    try {
      const response = await fetch("v1/events", { headers, signal: abort.signal, cache: "no-store" });
      if (response.status === 401) {
        this.stop();
        hooks.unauthenticated();
        return false;
      }
      if (response.status === 400 && resumed) {
        this.lastId = ""; // an id the server no longer knows: start afresh
        return true;
      }
      if (!response.ok || !response.body) return false;
      // The page catches up first (a fresh connection reads the inbox again), then says live.
      await this.onOpen({ fresh: !resumed });
      this.onState("live");
      const parser = new FrameParser();
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return true;
        clearTimeout(silence);
        silence = setTimeout(() => abort.abort(), SILENCE_MS);
        for (const frame of parser.push(value)) this.#dispatch(frame);
        if (parser.retry !== null) this.retry = parser.retry;
      }
    } catch {
      return false; // a network failure, or aborted: reconnect (unless stopped)
    } finally {
      clearTimeout(silence);
    }
  }

  #dispatch(frame) {
    if (frame.id) this.lastId = frame.id;
    let event;
    try {
      event = JSON.parse(frame.data);
    } catch {
      return; // not one of the server's events
    }
    this.onEvent({ ...event, type: frame.type });
  }
}
