// A background job's output, read with the `output` op from a byte offset:
// polled while the job runs, then read to its end once (kept after the job
// exits, up to the job's output cap).

import { failure, h, unsupported } from "./dom.js";

const POLL_MS = 700;
const PAGE = 65536;

export function outputPane(gw, job) {
  const text = h("pre", { className: "output", "data-job": job });
  const note = h("p", { className: "quiet" }, "reading…");
  const pane = h("div", { className: "job-output" }, note, text);
  let next = 0;
  let timer = null;
  let stopped = false;

  async function read() {
    try {
      for (;;) {
        const reply = await gw.request("output", { job, after: next, limit: PAGE });
        if (stopped) return;
        text.append(reply.text);
        const grew = reply.next > next;
        next = reply.next;
        const state = reply.running ? "running" : "exited";
        note.textContent = `${state}, ${next} bytes${reply.capped ? " (past the output cap, the rest was not kept)" : ""}`;
        pane.dataset.state = state;
        if (!reply.truncated && (!grew || reply.text.length === 0)) {
          if (reply.running) timer = setTimeout(read, POLL_MS);
          return;
        }
      }
    } catch (error) {
      if (stopped) return;
      note.replaceWith(unsupported(error)
        ? h("p", { className: "quiet" }, "this server cannot read job output (it has no output op)")
        : failure(error));
    }
  }

  read();
  return {
    element: pane,
    close() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
