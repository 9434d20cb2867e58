// An actor's events as a conversation: prompts, the model's text (streamed,
// then replaced by the committed message), tool calls with their arguments
// and results, approvals asked and answered, job output; lifecycle events
// as markers between them. Events come in seq order, stored first, then live.

import { actorLink, append, h, pretty, when } from "./dom.js";

const LIFECYCLE = /^(actor\.|session\.|message\.dead_lettered)/;
const TURN_ENDS = new Set(["turn.completed", "turn.cancelled", "turn.failed", "turn.interrupted"]);

export class Conversation {
  // onAnswer(callId, approved, reason) answers a pending approval.
  constructor(container, { onAnswer }) {
    this.container = container;
    this.onAnswer = onAnswer;
    this.streaming = new Map(); // turn id -> the bubble the model's text streams into
    this.calls = new Map(); // call id -> its block
  }

  add(node) {
    const follow = this.atBottom();
    this.container.append(node);
    if (follow) this.container.scrollTop = this.container.scrollHeight;
    return node;
  }

  atBottom() {
    const c = this.container;
    return c.scrollHeight - c.scrollTop - c.clientHeight < 40;
  }

  marker(frame, text, className = "") {
    return this.add(h("div", { className: `marker ${className}`, "data-type": frame.type, "data-seq": frame.seq },
      // The time floats right on the first line: placed after a <pre>, it would drop below it.
      h("span", { className: "at" }, when(frame.at)), h("span", { className: "type" }, frame.type), " ", text || ""));
  }

  user(frame, label, text) {
    return this.add(h("div", { className: "msg user", "data-type": frame.type, "data-seq": frame.seq },
      h("div", { className: "who" }, label), h("div", { className: "text" }, text)));
  }

  bubble(turnId) {
    let bubble = this.streaming.get(turnId);
    if (!bubble) {
      bubble = this.add(h("div", { className: "msg assistant streaming", "data-turn-id": turnId },
        h("div", { className: "who" }, "model"), h("div", { className: "text" })));
      this.streaming.set(turnId, bubble);
    }
    return bubble;
  }

  call(data) {
    let block = this.calls.get(data.call_id || data.id);
    if (!block) {
      const id = data.call_id || data.id;
      block = this.add(h("div", { className: "tool", "data-call-id": id },
        h("div", { className: "who" }, "tool call ", h("b", { className: "name" }, data.name), " ",
          h("span", { className: "call-status" }, "asked")),
        h("pre", { className: "arguments" }, pretty(data.arguments)),
        h("div", { className: "approval" }),
        h("pre", { className: "result", hidden: true })));
      this.calls.set(id, block);
    }
    return block;
  }

  status(block, text) {
    block.querySelector(".call-status").textContent = text;
    block.dataset.status = text;
  }

  askApproval(block, callId) {
    const reason = h("input", { className: "reason", placeholder: "reason (the model reads it)" });
    const answer = (approved) => this.onAnswer(callId, approved, reason.value.trim());
    append(block.querySelector(".approval"), [reason,
      h("button", { className: "approve", type: "button", onclick: () => answer(true) }, "Approve"),
      h("button", { className: "deny", type: "button", onclick: () => answer(false) }, "Deny")]);
  }

  apply(frame) {
    const data = frame.data || {};
    const type = frame.type;
    if (type === "turn.delta") {
      this.bubble(data.turn_id).querySelector(".text").append(data.text);
      if (this.atBottom()) this.container.scrollTop = this.container.scrollHeight;
    } else if (type === "turn.retrying") {
      const bubble = this.streaming.get(data.turn_id);
      if (bubble) bubble.querySelector(".text").textContent = "";
      this.marker(frame, `attempt ${data.attempt} failed: ${data.error}`, "warning");
    } else if (type === "assistant.message") {
      const bubble = this.streaming.get(data.turn_id);
      this.streaming.delete(data.turn_id);
      if (data.content) {
        const shown = bubble || this.bubble(data.turn_id);
        this.streaming.delete(data.turn_id);
        shown.querySelector(".text").textContent = data.content;
        shown.classList.remove("streaming");
        shown.dataset.seq = frame.seq;
      } else if (bubble) {
        bubble.remove();
      }
      for (const call of data.tool_calls || []) this.call(call);
    } else if (type === "tool.started") {
      this.status(this.call(data), "running");
    } else if (type === "approval.requested") {
      const block = this.call(data);
      this.status(block, "awaiting approval");
      this.askApproval(block, data.call_id);
    } else if (type === "approval.answered") {
      const block = this.call(data);
      const approval = block.querySelector(".approval");
      approval.replaceChildren();
      if (data.reason) approval.append(h("span", { className: "quiet" }, `answered: ${data.reason}`));
      this.status(block, data.approved ? "approved" : "denied");
    } else if (type === "tool.finished") {
      const block = this.call(data);
      for (const button of block.querySelectorAll(".approval input, .approval button")) button.remove();
      this.status(block, data.status);
      const result = block.querySelector(".result");
      result.hidden = false;
      result.textContent = data.result;
    } else if (type === "turn.started") {
      this.user(frame, data.prompt_id ? "prompt" : "machine event", data.prompt);
    } else if (type === "task.started") {
      this.user(frame, "task", data.prompt);
    } else if (type === "turn.steered") {
      this.user(frame, `steered into ${data.turn_id}`, data.text);
    } else if (type === "steer.accepted") {
      this.marker(frame, `${data.id} waits for the next model call of ${data.turn_id}`);
    } else if (type === "message.queued") {
      this.user(frame, `message ${data.message_id}`, data.text);
    } else if (TURN_ENDS.has(type) && this.streaming.has(data.turn_id)) {
      // The turn ended while the model was answering: what streamed stays, marked cut.
      const bubble = this.streaming.get(data.turn_id);
      this.streaming.delete(data.turn_id);
      bubble.classList.replace("streaming", "cut");
      this.apply(frame);
    } else if (type === "turn.completed") {
      this.marker(frame, data.turn_id, "lifecycle");
    } else if (type === "turn.failed") {
      this.marker(frame, `${data.turn_id}: ${data.error}`, "error");
    } else if (type === "turn.cancelled" || type === "turn.interrupted" || type === "turn.resumed") {
      this.marker(frame, [data.turn_id, data.reason].filter(Boolean).join(": "), "warning");
    } else if (type === "message.rejected") {
      this.marker(frame, `${data.type} (seq ${data.seq}): ${data.reason}`, "warning");
    } else if (type === "job.ended" || type === "job.adopted") {
      this.marker(frame, [actorLink(`job/${data.job_id}`), " ", data.status || data.command || ""], "job");
    } else if (type === "job.started") {
      this.marker(frame, `${data.command} (pid ${data.pid})`, "job");
    } else if (type === "job.finished") {
      this.marker(frame, `${data.status}, exit ${data.exit_code ?? "none"} ${data.reason || ""}`, "job");
    } else if (type === "task.settled" || type === "message.answered") {
      this.marker(frame, h("pre", {}, pretty(data)), "lifecycle");
    } else if (LIFECYCLE.test(type)) {
      this.marker(frame, data.error ? String(data.error.message || data.error) : "", "lifecycle");
    } else if (type !== "queue.enqueued" && type !== "queue.dequeued" && !type.startsWith("queue.")) {
      this.marker(frame, Object.keys(data).length ? h("pre", {}, pretty(data)) : "");
    }
  }
}
