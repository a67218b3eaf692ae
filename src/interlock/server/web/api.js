// Talking to the server's /v1 API, signed in with a token or with single sign-on.
//
// A pasted token lives in sessionStorage (gone when the tab closes) and goes in the
// Authorization header of every call. Signed in with single sign-on (or through a proxy that
// signs people in), the browser's cookie says who calls instead, and every call also carries
// the session's CSRF token (X-CSRF-Token), which the server gives this page only
// (GET auth/session): another site can make the browser send its cookie, not that token.
// URLs are relative to the page, so the inbox works wherever the server is mounted.

const KEY = "interlock.token";
let csrf = null;

export const session = {
  get token() {
    return sessionStorage.getItem(KEY);
  },
  set token(value) {
    if (value) sessionStorage.setItem(KEY, value);
    else sessionStorage.removeItem(KEY);
  },
  /** The CSRF token of the browser's sign-in (single sign-on or proxy), kept in memory. */
  get csrf() {
    return csrf;
  },
  set csrf(value) {
    csrf = value || null;
  },
};

/** A refusal from the server (or no answer at all: `status` 0). */
export class ApiError extends Error {
  constructor(status, body, retryAfter = null) {
    super(body?.message ?? `the server answered ${status}`);
    this.status = status;
    this.code = body?.error ?? null;
    this.body = body ?? {};
    this.retryAfter = retryAfter;
  }
}

/** Called with every 401, so that the page can ask for a token again. */
export const hooks = { unauthenticated: () => {} };

/** The headers that say who calls: the token's, else the browser sign-in's CSRF token. */
export function credentials() {
  if (session.token) return { Authorization: `Bearer ${session.token}` };
  return session.csrf ? { "X-CSRF-Token": session.csrf } : {};
}

function headers(extra = {}) {
  return { Accept: "application/json", ...extra, ...credentials() };
}

async function answer(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = { message: `the server answered ${response.status} ${response.statusText}` };
  }
  if (response.ok) return body;
  const retry = Number(response.headers.get("Retry-After")) || null;
  const error = new ApiError(response.status, body, retry);
  if (response.status === 401) hooks.unauthenticated(error);
  throw error;
}

async function send(url, init) {
  let response;
  try {
    response = await fetch(url, init);
  } catch {
    throw new ApiError(0, { error: "network", message: "The server could not be reached." });
  }
  return answer(response);
}

/** GET `path` (relative to the page) with query `params` (empty ones left out). */
export function get(path, params = {}) {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") query.set(name, value);
  }
  const url = query.size ? `${path}?${query}` : path;
  return send(url, { headers: headers() });
}

/** POST `body` as JSON to `path` (relative to the page), signed in as every call is. */
export function post(path, body) {
  const init = { method: "POST", headers: headers({ "Content-Type": "application/json" }), body: JSON.stringify(body) };
  return send(path, init);
}

/** The identity the token belongs to, or an ApiError (401 for a wrong token). */
export async function whoAmI(token) {
  const response = await fetch("v1/me", {
    headers: { Accept: "application/json", Authorization: `Bearer ${token}` },
  }).catch(() => null);
  if (response === null) {
    throw new ApiError(0, { error: "network", message: "The server could not be reached." });
  }
  if (response.status === 401) throw new ApiError(401, await response.json().catch(() => null));
  return answer(response);
}

/**
 * How this browser is signed in without a token (GET auth/session): {identity, via, csrf,
 * sign_in, sign_out, refused, four_eyes}; null when the server cannot tell.
 */
export async function browserSession() {
  const response = await fetch("auth/session", { headers: { Accept: "application/json" }, cache: "no-store" }).catch(() => null);
  if (!response?.ok) return null;
  return response.json().catch(() => null);
}

/** End this browser's single sign-on session (POST auth/logout, with its CSRF token). */
export async function signOutSession() {
  const response = await fetch("auth/logout", { method: "POST", headers: headers() }).catch(() => null);
  csrf = null;
  return Boolean(response?.ok);
}

const RETRIES = [500, 1000, 2000, 4000];

/**
 * Send a decision (`body`, JSON text) on interrupt `id` with Idempotency-Key `key`, retrying
 * while the network fails or the thread is busy. One key for every attempt: when the network drops a request (or
 * its answer) the retry cannot be taken for a second decision.
 */
export async function decide(id, body, key, onRetry = () => {}) {
  const init = {
    method: "POST",
    headers: headers({ "Content-Type": "application/json", "Idempotency-Key": key }),
    body,
  };
  const url = `v1/interrupts/${encodeURIComponent(id)}/decision`;
  for (let attempt = 0; ; attempt++) {
    try {
      return await send(url, init);
    } catch (error) {
      // No answer, or the thread busy with another decision for a moment: nothing was
      // recorded under this key yet, so sending it again is safe.
      const transient = error.status === 0 || error.code === "thread_busy";
      if (!transient || attempt >= RETRIES.length) throw error;
      onRetry(attempt + 1);
      await new Promise((done) => setTimeout(done, RETRIES[attempt]));
    }
  }
}

export const interrupts = (params) => get("v1/interrupts", params);
export const interrupt = (id) => get(`v1/interrupts/${encodeURIComponent(id)}`);
export const thread = (id, app) => get(`v1/threads/${encodeURIComponent(id)}`, { app });
export const audit = (id, app) => get(`v1/threads/${encodeURIComponent(id)}/audit`, { app, limit: 500 });
export const threads = (params) => get("v1/threads", params);

const threadPath = (id) => `v1/threads/${encodeURIComponent(id)}`;
export const graph = (id, app) => get(`${threadPath(id)}/graph`, { app });
export const timeline = (id, app, before = null, limit = 20) => get(`${threadPath(id)}/timeline`, { app, before, limit });
export const compare = (id, app, from, to) => get(`${threadPath(id)}/compare`, { app, from, to });
export const checkpoint = (id, app, checkpointId) => get(`${threadPath(id)}/checkpoints/${encodeURIComponent(checkpointId)}`, { app });
export const schema = (id, app) => get(`${threadPath(id)}/schema`, { app });
/** Fork thread `id` (admins only): `body` is {checkpoint_id, new_thread, values, as_node, run, app}. */
export const fork = (id, body) => post(`${threadPath(id)}/fork`, body);
