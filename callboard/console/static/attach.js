// Live attach on an actor's page (docs/protocol.md, "Live attach"), for
// every kind: pause the actor (its mailbox is held: messages are stored and
// acknowledged, none is handled), step it one message at a time while
// paused, resume it; and replace its committed state with `set_state`.
//
// The state is edited as JSON text and sent as it parses: the server, not
// the page, decides whether it fits the kind's state type, and its refusal
// (which names the field, e.g. `$.total`) is shown above the editor as given.

import { failure, h, pretty } from "./dom.js";

export function liveAttach(gw, address, { done, say, refresh }) {
  const run = async (op, describe) => {
    try {
      done(describe(await gw.request(op, { actor: address })));
    } catch (error) {
      say(failure(error));
    }
    refresh();
  };
  const pause = h("button", { type: "button", id: "pause-actor",
    title: "hold its mailbox: messages are stored and acknowledged, none is handled until it is resumed",
    onclick: () => run("pause", () => `paused: ${address} handles nothing until it is resumed or stepped`) },
  "Pause actor");
  const resume = h("button", { type: "button", id: "resume-actor", hidden: true,
    onclick: () => run("resume", (reply) => `resumed: ${address} is ${reply.status}`) }, "Resume actor");
  const step = h("button", { type: "button", id: "step-actor", hidden: true,
    title: "hand the paused actor its next message, and only that one",
    onclick: () => run("step", (reply) => (reply.handled === null || reply.handled === undefined
      ? "step: nothing waits" : `step: handled seq ${reply.handled}`)) }, "Step");

  const input = h("textarea", { id: "state-input", rows: 6, spellcheck: "false",
    "aria-label": "the new state, as JSON" });
  const problem = h("p", { className: "error", id: "state-error", hidden: true });
  const form = h("form", { className: "state-edit", id: "state-form", hidden: true },
    h("p", { className: "quiet" }, "The new state, as JSON: every field the kind's state holds, each of its type."),
    problem, input,
    h("div", { className: "buttons" },
      h("button", { type: "submit", id: "save-state" }, "Save state"),
      h("button", { type: "button", id: "cancel-state", onclick: () => close() }, "Cancel")));
  const edit = h("button", { type: "button", id: "edit-state", hidden: true, onclick: () => open() }, "Edit state");
  let live = false;

  const tell = (text) => {
    problem.textContent = text || "";
    problem.hidden = !text;
  };
  function close() {
    form.hidden = true;
    edit.hidden = !live;
  }
  // The editor starts from the state as committed now (not as last drawn).
  async function open() {
    try {
      input.value = pretty((await gw.request("state", { actor: address })).state);
    } catch (error) {
      say(failure(error));
      return;
    }
    tell(null);
    form.hidden = false;
    edit.hidden = true;
    input.focus();
  }
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    let state;
    try {
      state = JSON.parse(input.value);
    } catch (error) {
      tell(`the new state is not JSON (${error.message}); nothing was sent`);
      return;
    }
    try {
      const reply = await gw.request("set_state", { actor: address, state });
      close();
      done(`state replaced (seq ${reply.seq})`);
      refresh();
    } catch (error) {
      tell(error.code ? `${error.code}: ${error.message}` : String(error));
    }
  });

  // `view` is the actor's `inspect`; `running` is false once it has ended.
  function update(view, running) {
    live = running;
    const paused = view.status === "paused";
    pause.hidden = !running || paused;
    resume.hidden = !paused;
    step.hidden = !paused;
    if (!running) form.hidden = true;
    edit.hidden = !running || !form.hidden;
  }
  return { buttons: [pause, resume, step], editor: [edit, form], update };
}
