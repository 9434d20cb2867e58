// The console's start: the token, the one connection, the views by route.
//
// The token arrives in the address's fragment (`#token=...`, which browsers
// never send to a server), is kept in sessionStorage (this tab only) and is
// taken out of the address bar at once. Without one, the page asks for it.

import { actorView } from "./actor.js";
import { actorsView } from "./actors.js";
import { clear, unsupported } from "./dom.js";
import { approvalsView, deadLettersView, jobsView } from "./lists.js";
import { Gateway } from "./wire.js";

const TOKEN_KEY = "callboard.token";
const gatewayUrl = document.querySelector('meta[name="callboard-gateway"]').content;
const main = document.getElementById("view");
const dialog = document.getElementById("token-dialog");

function takeToken() {
  const match = /^#token=([^&#]+)/.exec(location.hash);
  if (match) {
    sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
    history.replaceState(null, "", `${location.pathname}${location.search}#/actors`);
  }
  return sessionStorage.getItem(TOKEN_KEY);
}

function askForToken(reason) {
  const error = document.getElementById("token-error");
  error.hidden = !reason;
  error.textContent = reason || "";
  document.getElementById("forget-token").hidden = true;
  if (!dialog.open) dialog.showModal();
  document.getElementById("token-input").focus();
}

document.getElementById("token-form").addEventListener("submit", () => {
  const input = document.getElementById("token-input");
  const token = input.value.trim();
  input.value = "";
  if (!token) return;
  sessionStorage.setItem(TOKEN_KEY, token);
  start(token);
});

document.getElementById("forget-token").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  location.reload();
});

// Every actor's live events, for the views that follow them all.
class Live {
  constructor(gw) {
    this.gw = gw;
    this.listeners = new Set();
    this.available = true;
    gw.subscribe("*", null, (frame) => {
      for (const listener of this.listeners) listener(frame);
    }, () => {
      this.available = false; // a scoped token cannot follow every actor: views poll instead
    });
  }

  on(listener) {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

// The counts in the navigation: pending approvals (always visible) and dead letters.
class Counts {
  constructor(gw, live) {
    this.gw = gw;
    this.timer = null;
    live.on((frame) => {
      if (/^(approval\.|turn\.|message\.dead_lettered|actor\.)/.test(frame.type)) this.soon();
    });
    setInterval(() => this.refresh(), 5000);
    this.refresh();
  }

  soon() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.refresh(), 150);
  }

  async refresh() {
    await Promise.all([
      this.count("approvals", "approvals", "approval-count"),
      this.count("dead_letters", "dead_letters", "dead-letter-count"),
    ]);
  }

  async count(op, field, id) {
    const badge = document.getElementById(id);
    try {
      const reply = await this.gw.request(op);
      badge.textContent = String(reply[field].length);
      badge.classList.toggle("some", reply[field].length > 0);
      badge.title = "";
    } catch (error) {
      badge.textContent = "?";
      badge.title = unsupported(error) ? `this server has no ${op} op` : error.message;
    }
  }
}

let dispose = () => {};
let context = null;

function route() {
  dispose();
  dispose = () => {};
  clear(main);
  if (!context) return;
  const hash = decodeURIComponent(location.hash.replace(/^#\/?/, ""));
  const [view, ...rest] = hash.split("/");
  for (const link of document.querySelectorAll("nav a")) {
    link.classList.toggle("current", link.dataset.view === (view || "actors"));
  }
  const views = { approvals: approvalsView, "dead-letters": deadLettersView, jobs: jobsView };
  if (view === "actor" && rest.length >= 2) {
    dispose = actorView(main, context, rest.join("/")) || dispose;
  } else if (views[view]) {
    dispose = views[view](main, context) || dispose;
  } else {
    dispose = actorsView(main, context) || dispose;
  }
}

window.addEventListener("hashchange", route);

function start(token) {
  const state = document.getElementById("connection");
  const gw = new Gateway(gatewayUrl, token, {
    onState: (text) => {
      state.textContent = text;
      state.dataset.state = text;
      if (text === "connected" && !context) welcomed(gw);
    },
    onUnauthorized: (error) => {
      sessionStorage.removeItem(TOKEN_KEY);
      context = null;
      route();
      askForToken(`The gateway refused that token: ${error.message}`);
    },
  });
  gw.connect().catch(() => {}); // refused: onUnauthorized; dropped: it reconnects
}

function welcomed(gw) {
  if (dialog.open) dialog.close();
  document.getElementById("forget-token").hidden = false;
  const live = new Live(gw);
  const counts = new Counts(gw, live);
  context = { gw, live, counts };
  route();
}

const token = takeToken();
if (token) start(token);
else askForToken(null);
