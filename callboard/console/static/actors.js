// The actors: address, kind, status, mailbox, restarts, last event, and the
// node that owns each once there are several; filtered by kind and status,
// searched by address. The list is read again when events say it changed.

import { actorLink, append, clear, failure, h, kindOf, unsupported, when } from "./dom.js";

const lastEvents = new Map(); // address -> {type, at}, kept across views
const LOOKUPS = 100; // actors whose last stored event one list reads at most
const asked = new Set(); // addresses whose last event was looked up already

// The last stored event of each row not heard from yet: its seq from
// `inspect` (`head`), the event itself from a replay of that one seq.
async function lookUpLastEvents(gw, rows, redraw) {
  const missing = rows.filter((row) => !lastEvents.has(row.actor) && !asked.has(row.actor)).slice(0, LOOKUPS);
  for (const row of missing) asked.add(row.actor);
  await Promise.all(missing.map(async (row) => {
    try {
      const { head } = await gw.request("inspect", { actor: row.actor });
      if (!head) return;
      await new Promise((resolve) => {
        const sub = gw.subscribe(row.actor, head - 1, (frame) => {
          if (frame.seq === null) return;
          if (!lastEvents.has(row.actor)) lastEvents.set(row.actor, { type: frame.type, at: frame.at });
          sub.close();
          resolve();
        }, resolve);
        setTimeout(() => {
          sub.close();
          resolve();
        }, 10000);
      });
    } catch {
      // an actor gone meanwhile, or out of the token's reach: no last event to show
    }
  }));
  if (missing.length) redraw();
}

export function actorsView(main, { gw, live }) {
  const kindSelect = h("select", { id: "filter-kind", onchange: () => load() }, h("option", { value: "" }, "every kind"));
  const statusSelect = h("select", { id: "filter-status", onchange: () => draw() }, h("option", { value: "" }, "every status"));
  const search = h("input", { id: "search", type: "search", placeholder: "search by address", oninput: () => draw() });
  const body = h("tbody");
  const nodeHead = h("th", { hidden: true }, "owner node");
  let note = h("p", { className: "quiet", id: "actors-note" });
  const table = h("table", { id: "actors", className: "rows" },
    h("thead", {}, h("tr", {}, h("th", {}, "address"), h("th", {}, "kind"), h("th", {}, "status"),
      h("th", {}, "mailbox"), h("th", {}, "restarts"), h("th", {}, "last event"), nodeHead)),
    body);
  append(main, [h("h1", {}, "Actors"), h("div", { className: "filters" }, kindSelect, statusSelect, search), note, table]);

  let rows = [];
  let severalNodes = false;
  let timer = null;
  let stopped = false;

  function options(select, values) {
    const chosen = select.value;
    const known = new Set([...select.options].map((o) => o.value));
    for (const value of [...values].sort()) if (!known.has(value)) select.append(h("option", { value }, value));
    select.value = chosen;
  }

  function draw() {
    const term = search.value.trim().toLowerCase();
    const status = statusSelect.value;
    nodeHead.hidden = !severalNodes;
    clear(body);
    const shown = rows.filter((row) => (!status || row.status === status)
      && (!term || row.actor.toLowerCase().includes(term)));
    for (const row of shown) {
      const last = lastEvents.get(row.actor);
      const tr = h("tr", { "data-actor": row.actor },
        h("td", {}, actorLink(row.actor)),
        h("td", {}, kindOf(row.actor)),
        h("td", {}, h("span", { className: `status ${row.status}` }, row.status)),
        h("td", { className: "number" }, row.mailbox),
        h("td", { className: "number" }, row.restarts),
        h("td", {}, last ? `${last.type} ${when(last.at)}` : ""));
      if (severalNodes) tr.append(h("td", { className: "owner" }, row.owner || ""));
      body.append(tr);
    }
    note.textContent = `${shown.length} of ${rows.length} actors`;
  }

  async function load() {
    try {
      const kind = kindSelect.value;
      rows = await gw.listAll(kind ? { kind } : {});
      if (!kind) options(kindSelect, new Set(rows.map((row) => kindOf(row.actor))));
      options(statusSelect, new Set(rows.map((row) => row.status)));
      // The owner column once there are several nodes (rows name their owner
      // then; a token that may not count every node's actors still sees them).
      try {
        severalNodes = (await gw.request("nodes")).nodes.length > 1;
      } catch (error) {
        if (!unsupported(error) && error.code !== "forbidden") throw error;
        severalNodes = false;
      }
      severalNodes ||= new Set(rows.map((row) => row.owner).filter(Boolean)).size > 1;
      if (!stopped) draw();
      lookUpLastEvents(gw, rows, () => stopped || draw());
    } catch (error) {
      if (!stopped) note.replaceWith((note = failure(error)));
    }
  }

  function soon() {
    clearTimeout(timer);
    timer = setTimeout(load, 200);
  }

  const off = live.on((frame) => {
    if (frame.seq === null) return; // streamed text: nothing in the list changes
    lastEvents.set(frame.actor, { type: frame.type, at: frame.at });
    soon();
  });
  const poll = setInterval(load, live.available ? 10000 : 3000);
  load();
  return () => {
    stopped = true;
    off();
    clearInterval(poll);
    clearTimeout(timer);
  };
}
