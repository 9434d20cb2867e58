// One actor: its events from seq 1 on, then live (resumed by seq after a
// dropped connection), its last committed state, and what can be done to it:
// a session takes prompts, cancel, the reordering or removal of queued
// prompts, and a hold on its queue; a task takes messages and cancel; a job shows its output; every
// actor can be paused, stepped and resumed, have its state replaced (live
// attach, ./attach.js), be stopped, and be deleted once it has ended.

import { liveAttach } from "./attach.js";
import { Conversation } from "./conversation.js";
import { append, clear, failure, freshKey, h, kindOf, pretty, unsupported } from "./dom.js";
import { outputPane } from "./output.js";

const LIVE_STATUSES = new Set(["active", "idle", "failing", "running", "paused"]);

export function actorView(main, { gw }, address) {
  const kind = kindOf(address);
  const status = h("span", { className: "status", id: "actor-status" });
  const notice = h("div", { className: "notice", id: "actor-notice" });
  const events = h("div", { className: "conversation", id: "conversation" });
  const actions = h("div", { className: "actions", id: "actions" });
  const side = h("aside", { className: "side" });
  const stateBox = h("pre", { className: "state", id: "actor-state" });
  const details = h("div", { className: "facts", id: "actor-facts" });
  append(main, [
    h("h1", {}, address, " ", status),
    notice,
    h("div", { className: "actor" },
      h("section", { className: "stream" }, events, actions),
      side),
  ]);
  append(side, [h("h2", {}, "State"), details, h("details", { open: kind !== "job" }, h("summary", {}, "snapshot"), stateBox)]);

  const say = (node) => notice.replaceChildren(node);
  const done = (text) => say(h("p", { className: "ok" }, text));
  const act = async (what, promise) => {
    try {
      const reply = await promise;
      done(`${what}: ok${reply.seq !== undefined ? ` (seq ${reply.seq})` : ""}`);
      return reply;
    } catch (error) {
      say(failure(error));
      return null;
    }
  };

  const conversation = new Conversation(events, {
    onAnswer: (callId, approved, reason) => {
      const body = { call_id: callId, approved };
      if (reason) body.reason = reason;
      act(approved ? "approved" : "denied", gw.send(address, "approve", body, freshKey("approve")));
    },
  });

  // -- the queue (sessions) ---------------------------------------------------
  const queue = [];
  const queueList = h("ol", { className: "queue", id: "queue" });
  const queueEmpty = h("p", { className: "quiet" }, "no prompt waiting");
  function drawQueue() {
    clear(queueList);
    queue.forEach((entry, index) => {
      const move = (to) => act(`moved ${entry.id}`, gw.send(address, "queue.move", { id: entry.id, to }));
      queueList.append(h("li", { "data-prompt-id": entry.id },
        h("span", { className: "text" }, entry.text),
        h("button", { type: "button", title: "earlier", disabled: index === 0, onclick: () => move(index - 1) }, "↑"),
        h("button", { type: "button", title: "later", disabled: index === queue.length - 1, onclick: () => move(index + 1) }, "↓"),
        h("button", { type: "button", className: "remove", title: "remove",
          onclick: () => act(`removed ${entry.id}`, gw.send(address, "queue.remove", { id: entry.id })) }, "✕")));
    });
    queueEmpty.hidden = queue.length > 0;
  }
  function followQueue(frame) {
    const data = frame.data || {};
    const at = queue.findIndex((entry) => entry.id === data.id);
    if (frame.type === "queue.enqueued") queue.splice(Math.min(data.position, queue.length), 0, { id: data.id, text: data.text });
    else if ((frame.type === "queue.removed" || frame.type === "queue.dequeued") && at >= 0) queue.splice(at, 1);
    else if (frame.type === "queue.moved" && at >= 0) queue.splice(data.position, 0, ...queue.splice(at, 1));
    else return;
    drawQueue();
  }

  // -- the actions that fit the kind --------------------------------------------
  if (kind === "session" || kind === "task") {
    const type = kind === "session" ? "prompt" : "message";
    const input = h("textarea", { id: "prompt", rows: 3, placeholder: kind === "session" ? "a prompt" : "a follow-up message" });
    // queue: after the turns before it; steer: into the running turn; interrupt: instead of it.
    const mode = h("select", { id: "prompt-mode", title: "what the prompt does to a running turn" },
      h("option", { value: "queue" }, "queue"), h("option", { value: "steer" }, "steer"),
      h("option", { value: "interrupt" }, "interrupt"));
    const form = h("form", { className: "prompt", id: "prompt-form" }, input, mode,
      h("button", { type: "submit", id: "send-prompt" }, kind === "session" ? "Send prompt" : "Send message"));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const text = input.value.trim();
      if (!text) return;
      const body = mode.value === "queue" ? { text } : { text, mode: mode.value };
      act(`${type} sent`, gw.send(address, type, body, freshKey(type))).then((reply) => {
        if (reply) input.value = "";
      });
    });
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) form.requestSubmit();
    });
    append(actions, [form, h("button", { type: "button", id: "cancel-turn",
      onclick: () => act("cancel sent", gw.send(address, "cancel", {}, freshKey("cancel"))) },
    kind === "session" ? "Cancel turn" : "Cancel task")]);
  }
  // Two pauses, named apart: "Hold queue" is the session's own (its `pause`
  // message: the running turn goes on, no other starts from the queue, and
  // prompts, cancel and approvals are still handled; a session holds its queue
  // by itself when a restart interrupted its turn), "Pause actor" is live
  // attach's (nothing at all is handled).
  const held = h("p", { className: "held", id: "queue-held", hidden: true }, "held: no turn starts from the queue until it is released");
  const hold = h("button", { type: "button", id: "hold-queue", hidden: true,
    title: "let the running turn finish and start no other from the queue; prompts, cancel and approvals are still handled",
    onclick: () => act("hold sent", gw.send(address, "pause", {}, freshKey("pause"))) }, "Hold queue");
  const release = h("button", { type: "button", id: "release-queue", hidden: true,
    onclick: () => act("release sent", gw.send(address, "resume", {}, freshKey("resume"))) }, "Release queue");
  if (kind === "session") {
    side.prepend(h("h2", {}, "Queued prompts"), held, queueList, queueEmpty, h("div", { className: "buttons" }, hold, release));
    drawQueue();
  }
  let output = null;
  if (kind === "job") {
    output = outputPane(gw, address);
    side.prepend(h("h2", {}, "Output"), output.element);
  }
  const stop = h("button", { type: "button", id: "stop", className: "danger", onclick: () => {
    if (confirm(`Stop ${address}?`)) act("stopped", gw.request("stop", { actor: address })).then(inspect);
  } }, "Stop");
  const remove = h("button", { type: "button", id: "delete", className: "danger", hidden: true, onclick: async () => {
    if (!confirm(`Delete ${address} and its events?`)) return;
    if (await act("deleted", gw.request("delete", { actor: address }))) location.hash = "#/actors";
  } }, "Delete");
  const attach = liveAttach(gw, address, { done, say, refresh: () => inspect() });
  append(actions, [...attach.buttons, stop, remove]);
  append(side, attach.editor);

  // -- state ---------------------------------------------------------------------
  let inspecting = null;
  let polling = null;
  let closed = false; // an answer that comes after the page left sets no timer
  let paused = false;
  async function inspect() {
    try {
      const view = await gw.request("inspect", { actor: address });
      // A paused actor emits nothing while messages reach its held mailbox: asked again, it shows them.
      clearTimeout(polling);
      if (closed) return;
      paused = view.status === "paused";
      if (paused) polling = setTimeout(inspect, 2000);
      status.textContent = view.status;
      status.className = `status ${view.status}`;
      const ended = !LIVE_STATUSES.has(view.status);
      stop.hidden = ended;
      remove.hidden = !ended;
      attach.update(view, !ended);
      const queueHeld = Boolean(view.state && view.state.paused);
      held.hidden = !queueHeld;
      hold.hidden = ended || kind !== "session" || queueHeld;
      release.hidden = ended || kind !== "session" || !queueHeld;
      clear(details);
      for (const field of ["kind", "status", "cursor", "mailbox", "head", "restarts", "owner"]) {
        if (view[field] !== undefined && view[field] !== null) details.append(h("div", {}, h("span", { className: "quiet" }, field), " ", String(view[field])));
      }
      if (view.last_error) details.append(h("details", { className: "error" }, h("summary", {}, "last error"), h("pre", {}, pretty(view.last_error))));
      if (view.summary) details.append(h("details", {}, h("summary", {}, "summary"), h("pre", { id: "actor-summary" }, pretty(view.summary))));
      if (view.spec !== undefined && view.spec !== null) details.append(h("details", {}, h("summary", {}, "spec"), h("pre", { id: "actor-spec" }, pretty(view.spec))));
      stateBox.textContent = pretty(view.state);
    } catch (error) {
      say(unsupported(error) ? h("p", {}, error.message) : failure(error));
      clearTimeout(polling);
      if (paused && !closed) polling = setTimeout(inspect, 2000); // asked again after a dropped connection
    }
  }
  const soon = () => {
    clearTimeout(inspecting);
    inspecting = setTimeout(inspect, 200);
  };

  const sub = gw.subscribe(address, 0, (frame) => {
    conversation.apply(frame);
    followQueue(frame);
    if (frame.seq !== null) soon();
  }, (error) => say(failure(error)));
  inspect();
  return () => {
    closed = true;
    sub.close();
    clearTimeout(inspecting);
    clearTimeout(polling);
    if (output) output.close();
  };
}
