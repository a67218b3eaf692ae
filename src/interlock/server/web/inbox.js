// The web inbox: sign in with a token, see what waits for a decision, decide.
//
// Routes live in the URL's hash: #/ (the pending list, #/?thread=…&tool=…&key=… filtered),
// #/interrupts/<id> (one question), #/threads/<id> (one thread) and #/failed (the threads
// whose run failed). One event stream feeds
// whichever view is shown.

import * as api from "./api.js";
import { detailView } from "./detail.js";
import { h, fill, tick } from "./dom.js";
import { EventStream } from "./events.js";
import { failedView } from "./failed.js";
import { listView } from "./list.js";
import { threadView } from "./thread.js";

const main = document.getElementById("main");
const who = document.getElementById("who");
const live = document.getElementById("live");

let me = null; // the signed-in identity (GET v1/me)
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
  else if (parts[0] === "threads" && parts[1]) view = threadView(parts[1]);
  else if (parts[0] === "failed") view = failedView();
  else view = listView(new URLSearchParams(query));
  document.title = `${view.title} · interlock`;
  fill(main, view.element);
  view.element.querySelector("h1")?.focus({ preventScroll: true });
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
    h("button", { type: "button", className: "secondary small", onclick: () => signOut("You are signed out.") }, "Log out"),
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

function signOut(message) {
  stream?.stop();
  stream = null;
  me = null;
  view = null;
  api.session.token = null;
  who.hidden = true;
  fill(who);
  showLive(null);
  signInForm(message);
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
    if (me) signOut("The server no longer accepts your token. Sign in again.");
  };
  window.addEventListener("hashchange", route);
  setInterval(tick, 1000);
  const token = api.session.token;
  if (!token) return signInForm();
  try {
    signedIn(await api.whoAmI(token));
  } catch (failure) {
    if (failure.status === 401) api.session.token = null;
    signInForm(failure.status === 401 ? "Your token is no longer accepted. Sign in again." : `Could not sign in: ${failure.message}`, true);
  }
}

start();
