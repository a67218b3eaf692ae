// The web inbox: sign in (single sign-on, or a token), see what waits for a decision, decide.
//
// Routes live in the URL's hash: #/ (the pending list, #/?thread=…&tool=…&key=… filtered),
// #/interrupts/<id> (one question), #/threads/<id> (one thread), #/threads/<id>/studio (its
// graph, timeline and forks; ?app=… to pick the app) and #/failed (the threads whose run
// failed). One event stream feeds
// whichever view is shown.

import * as api from "./api.js";
import { detailView } from "./detail.js";
import { h, fill, tick } from "./dom.js";
import { EventStream } from "./events.js";
import { failedView } from "./failed.js";
import { listView } from "./list.js";
import { studioView } from "./studio.js";
import { threadView } from "./thread.js";

const main = document.getElementById("main");
const who = document.getElementById("who");
const live = document.getElementById("live");

let me = null; // the signed-in identity (GET v1/me, or GET auth/session)
let browser = null; // how the browser is signed in without a token (GET auth/session)
let stream = null;
let view = null;

const LIVE = {
  connecting: "Connecting…",
  live: "Live",
  reconnecting: "Reconnecting…",
};

function showLive(state) {
  live.textContent = LIVE[state] ?? "";
  live.dataset.state = state;
}

function route() {
  if (!me) return;
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, query = ""] = hash.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "interrupts" && parts[1]) view = detailView(parts[1], { me });
  else if (parts[0] === "threads" && parts[1] && parts[2] === "studio") {
    view = studioView(parts[1], { me, app: new URLSearchParams(query).get("app") });
  } else if (parts[0] === "threads" && parts[1]) view = threadView(parts[1]);
  else if (parts[0] === "failed") view = failedView();
  else view = listView(new URLSearchParams(query));
  document.title = `${view.title} · interlock`;
  fill(main, view.element);
  view.element.querySelector("h1")?.focus({ preventScroll: true });
}

/** The "Log out" control: forget the token, end the session, or go to the proxy's sign-out. */
function logOut() {
  if (api.session.token || browser?.via === "session") {
    return h("button", { type: "button", className: "secondary small", onclick: () => signOut("You are signed out.") }, "Log out");
  }
  if (browser?.sign_out) return h("a", { className: "button secondary small", href: browser.sign_out }, "Log out");
  return null;
}

function signedIn(identity) {
  me = identity;
  fill(
    who,
    "Signed in as ",
    h("strong", { id: "who-name" }, me.name),
    " ",
    h("span", { className: "badge role", id: "who-role" }, me.role),
    " ",
    logOut(),
  );
  who.hidden = false;
  stream = new EventStream({
    onEvent: (event) => view?.onEvent?.(event),
    onState: showLive,
    // A fresh connection cannot tell what happened before it: read the view again.
    onOpen: ({ fresh }) => (fresh ? view?.reload?.() : undefined),
  }).start();
  route();
}

async function signOut(message) {
  stream?.stop();
  stream = null;
  me = null;
  view = null;
  const ending = !api.session.token && browser?.via === "session";
  api.session.token = null;
  who.hidden = true;
  fill(who);
  showLive(null);
  if (ending) await api.signOutSession();
  browser = await api.browserSession();
  signInForm(message);
}

/** The way to sign in with single sign-on, when the server has it; back to this route after. */
function singleSignOn() {
  if (!browser?.sign_in) return null;
  const target = () => {
    const next = location.hash.length > 1 ? `?next=${encodeURIComponent(location.hash)}` : "";
    return `${browser.sign_in}${next}`;
  };
  return h(
    "div",
    { className: "sso" },
    h(
      "a",
      // The route shown when it is clicked, which may have changed since the form was drawn.
      { className: "button primary", id: "sso", href: target(), onclick: (event) => (event.currentTarget.href = target()) },
      "Sign in with single sign-on",
    ),
    h("p", { className: "muted" }, "Or sign in with an access token:"),
  );
}

function signInForm(message = "", isError = false) {
  document.title = "Sign in · interlock";
  const input = h("input", { id: "token", type: "password", autocomplete: "off", required: true, spellcheck: "false" });
  const error = h("p", { className: isError ? "error" : "note", role: "alert" }, message);
  const submit = h("button", { type: "submit", className: "primary" }, "Sign in");
  const form = h(
    "form",
    {
      className: "card login",
      onsubmit: async (event) => {
        event.preventDefault();
        const token = input.value.trim();
        if (!token) return;
        submit.disabled = true;
        error.className = "error";
        error.textContent = "";
        try {
          const identity = await api.whoAmI(token);
          api.session.token = token;
          signedIn(identity);
        } catch (failure) {
          error.textContent =
            failure.status === 401
              ? "That token was not accepted. Check that you pasted all of it, or ask an administrator for a new one."
              : `Could not sign in: ${failure.message}`;
          submit.disabled = false;
          input.select();
        }
      },
    },
    h("h1", { tabindex: -1 }, "Sign in"),
    singleSignOn(),
    browser?.refused ? h("p", { className: "error", role: "alert" }, `You are signed in through the proxy, but: ${browser.refused}.`) : null,
    h("p", {}, "Paste the access token you were given. It is kept only in this browser tab, and forgotten when you close it or log out."),
    h("div", { className: "field" }, h("label", { for: "token" }, "Access token"), input),
    error,
    h("div", { className: "buttons" }, submit),
  );
  fill(main, form);
  input.focus();
}

async function start() {
  api.hooks.unauthenticated = () => {
    if (!me) return;
    const why = api.session.token ? "The server no longer accepts your token." : "Your sign-in has ended.";
    api.session.token = null;
    browser = null; // its session is over: nothing to end
    signOut(`${why} Sign in again.`);
  };
  window.addEventListener("hashchange", route);
  setInterval(tick, 1000);
  const token = api.session.token;
  browser = await api.browserSession();
  if (!token) {
    if (browser?.identity) {
      api.session.csrf = browser.csrf;
      return signedIn({ ...browser.identity, four_eyes: browser.four_eyes });
    }
    return signInForm();
  }
  try {
    signedIn(await api.whoAmI(token));
  } catch (failure) {
    if (failure.status === 401) api.session.token = null;
    signInForm(failure.status === 401 ? "Your token is no longer accepted. Sign in again." : `Could not sign in: ${failure.message}`, true);
  }
}

start();
