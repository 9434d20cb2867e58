// The views across actors: pending approvals (answered here with a reason),
// dead letters (re-queued with one click), background jobs (with output).

import { actorLink, append, clear, failure, freshKey, h, pretty, unsupported, when } from "./dom.js";
import { outputPane } from "./output.js";

// A view that reads one op and draws its rows; read again on `events` and
// every few seconds. A row already shown is kept as it is (by `key`), so an
// answer being typed survives a reload; `update` refreshes what may change.
// Returns the view's disposer.
function listView(main, { live, counts }, { title, id, read, key, row, update, empty, events, missing }) {
  const notice = h("div", { className: "notice" });
  const list = h("div", { className: "cards", id });
  append(main, [h("h1", {}, title), notice, list]);
  let stopped = false;
  let timer = null;
  let shown = new Map(); // key -> element

  async function load() {
    try {
      const items = await read();
      if (stopped) return;
      const next = new Map();
      for (const item of items) {
        const old = shown.get(key(item));
        if (old && update) update(old, item);
        next.set(key(item), old || row(item, { say, load }));
      }
      shown = next;
      list.replaceChildren(...next.values());
      if (!items.length) list.append(h("p", { className: "quiet empty" }, empty));
    } catch (error) {
      shown = new Map();
      if (stopped) return;
      clear(list);
      list.append(unsupported(error) ? h("p", { className: "quiet" }, missing) : failure(error));
    }
  }
  function say(node) {
    notice.replaceChildren(node);
    counts.soon();
  }
  const off = live.on((frame) => {
    if (events.test(frame.type)) {
      clearTimeout(timer);
      timer = setTimeout(load, 150);
    }
  });
  const poll = setInterval(load, 5000);
  load();
  return () => {
    stopped = true;
    off();
    clearInterval(poll);
    clearTimeout(timer);
  };
}

export function approvalsView(main, context) {
  const { gw } = context;
  return listView(main, context, {
    title: "Pending approvals",
    id: "approvals",
    events: /^(approval\.|turn\.|actor\.)/,
    empty: "No tool call waits for an answer.",
    missing: "This server cannot list approvals (it has no approvals op).",
    read: async () => (await gw.request("approvals")).approvals,
    key: (item) => `${item.actor} ${item.call_id}`,
    row: (item, { say, load }) => {
      const reason = h("input", { className: "reason", placeholder: "reason (the model reads it)" });
      const answer = async (approved) => {
        const body = { call_id: item.call_id, approved };
        if (reason.value.trim()) body.reason = reason.value.trim();
        try {
          const ack = await gw.send(item.actor, "approve", body, freshKey("approve"));
          say(h("p", { className: "ok" }, `${approved ? "approved" : "denied"} ${item.tool} for ${item.actor} (seq ${ack.seq})`));
        } catch (error) {
          say(failure(error));
        }
        load();
      };
      return h("div", { className: "card approval-card", "data-actor": item.actor, "data-call-id": item.call_id },
        h("div", { className: "head" }, actorLink(item.actor), " wants to run ", h("b", {}, item.tool),
          h("span", { className: "at" }, when(item.requested_at))),
        h("pre", { className: "arguments" }, pretty(item.arguments)),
        h("div", { className: "answer" }, reason,
          h("button", { type: "button", className: "approve", onclick: () => answer(true) }, "Approve"),
          h("button", { type: "button", className: "deny", onclick: () => answer(false) }, "Deny")));
    },
  });
}

export function deadLettersView(main, context) {
  const { gw } = context;
  return listView(main, context, {
    title: "Dead letters",
    id: "dead-letters",
    events: /^message\.dead_lettered/,
    empty: "No dead letters.",
    missing: "This server cannot list dead letters (it has no dead_letters op).",
    read: async () => (await gw.request("dead_letters")).dead_letters,
    key: (item) => String(item.id),
    row: (item, { say, load }) => {
      const requeue = async () => {
        try {
          const ack = await gw.request("requeue", { dead_letter: item.id });
          say(h("p", { className: "ok" }, `dead letter ${item.id} re-queued to ${ack.actor} as seq ${ack.seq}`));
        } catch (error) {
          say(failure(error));
        }
        load();
      };
      return h("div", { className: "card dead-letter", "data-id": item.id, "data-actor": item.actor },
        h("div", { className: "head" }, `#${item.id} `, actorLink(item.actor), ` seq ${item.seq} `, h("b", {}, item.type),
          item.attempts !== undefined ? ` after ${item.attempts} attempts` : "", h("span", { className: "at" }, when(item.at)),
          h("button", { type: "button", className: "requeue", onclick: requeue }, "Re-queue")),
        h("p", { className: "error" }, item.error_type ? `${item.error_type}: ${item.error}` : item.error),
        h("details", {}, h("summary", {}, "body"), h("pre", {}, pretty(item.body))),
        item.traceback ? h("details", {}, h("summary", {}, "traceback"), h("pre", { className: "traceback" }, item.traceback)) : "");
    },
  });
}

export function jobsView(main, context) {
  const { gw } = context;
  const panes = []; // the output panes opened, closed with the view
  const dispose = listView(main, context, {
    title: "Background jobs",
    id: "jobs",
    events: /^job\./,
    empty: "No background jobs.",
    missing: "",
    read: () => gw.listAll({ kind: "job" }),
    key: (job) => job.actor,
    update: (element, job) => {
      const status = element.querySelector(".status");
      status.textContent = job.status;
      status.className = `status ${job.status}`;
    },
    row: (job) => {
      const details = h("details", { className: "job" }, h("summary", {}, "output"));
      details.addEventListener("toggle", () => {
        if (details.open && !details.dataset.read) {
          details.dataset.read = "yes";
          const pane = outputPane(gw, job.actor);
          panes.push(pane);
          details.append(pane.element);
        }
      });
      return h("div", { className: "card", "data-actor": job.actor },
        h("div", { className: "head" }, actorLink(job.actor), " ", h("span", { className: `status ${job.status}` }, job.status)),
        details);
    },
  });
  return () => {
    dispose();
    for (const pane of panes) pane.close();
  };
}
