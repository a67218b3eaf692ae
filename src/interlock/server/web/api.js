// Talking to the server's /v1 API with the bearer token kept for this browser tab.
//
// The token lives in sessionStorage (gone when the tab closes) and goes in the Authorization
// header of every call; the inbox uses no cookies, so another site cannot act in its name.
// URLs are relative to the page, so the inbox works wherever the server is mounted.

const KEY = "interlock.token";

export const session = {
  get token() {
    return sessionStorage.getItem(KEY);
  },
  set token(value) {
    if (value) sessionStorage.setItem(KEY, value);
    else sessionStorage.removeItem(KEY);
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

function headers(extra = {}) {
  const out = { Accept: "application/json", ...extra };
  if (session.token) out.Authorization = `Bearer ${session.token}`;
  return out;
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
