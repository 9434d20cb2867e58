// The gateway protocol (docs/protocol.md) from the browser: one websocket,
// requests matched to replies by id, subscriptions that resume by seq.
//
// The token goes in `hello` (a browser cannot set the Authorization header).
// When the connection drops, it is opened again with a capped backoff, and
// every subscription to one actor is made again with `after` set to the last
// seq it delivered, so the page sees no gap and no duplicate; a `lagged`
// frame is answered the same way.

export class GatewayError extends Error {
  constructor(code, message, frame) {
    super(message);
    this.code = code;
    this.frame = frame;
  }
}

export class Gateway {
  constructor(url, token, { onState = () => {}, onUnauthorized = () => {} } = {}) {
    this.url = url;
    this.token = token;
    this.onState = onState;
    this.onUnauthorized = onUnauthorized;
    this.ws = null;
    this.ready = null;
    this.nextId = 1;
    this.pending = new Map(); // request id -> {resolve, reject}
    this.subs = new Map(); // our handle -> Subscription
    this.bySub = new Map(); // server sub id -> Subscription
    this.early = new Map(); // server sub id -> events that came before its ok
    this.closed = false;
    this.delay = 250;
  }

  // Resolves once `welcome` came; rejects with GatewayError if refused.
  connect() {
    if (this.ready) return this.ready;
    if (this.closed) return Promise.reject(new GatewayError("closed", "this connection was closed"));
    this.ready = new Promise((resolve, reject) => {
      this.onState("connecting");
      const ws = new WebSocket(this.url);
      this.ws = ws;
      let welcomed = false;
      ws.onopen = () => {
        const hello = { op: "hello", id: "hello", protocol: 1, client: "callboard-console/1" };
        ws.send(JSON.stringify({ ...hello, token: this.token }));
      };
      ws.onmessage = (message) => {
        const frame = JSON.parse(message.data);
        if (!welcomed) {
          if (frame.op === "welcome") {
            welcomed = true;
            this.delay = 250;
            this.onState("connected");
            resolve(this);
            this.resubscribe();
          } else {
            const error = new GatewayError(frame.code, frame.message, frame);
            if (frame.code === "unauthorized") {
              this.closed = true;
              this.onUnauthorized(error);
            }
            reject(error);
          }
          return;
        }
        this.receive(frame);
      };
      ws.onclose = () => {
        const error = new GatewayError("closed", "the connection to the gateway closed");
        for (const { reject: fail } of this.pending.values()) fail(error);
        this.pending.clear();
        for (const sub of this.subs.values()) sub.serverId = null;
        this.bySub.clear();
        this.early.clear();
        this.ready = null;
        if (!welcomed) reject(error);
        if (this.closed) {
          this.onState("closed");
          return;
        }
        this.onState("reconnecting");
        const wait = this.delay;
        this.delay = Math.min(this.delay * 2, 5000);
        setTimeout(() => this.connect().catch(() => {}), wait);
      };
    });
    return this.ready;
  }

  close() {
    this.closed = true;
    if (this.ws) this.ws.close(1000);
  }

  receive(frame) {
    if (frame.op === "ok" || frame.op === "error") {
      const waiting = this.pending.get(frame.id);
      if (!waiting) return;
      this.pending.delete(frame.id);
      if (frame.op === "ok") waiting.resolve(frame);
      else waiting.reject(new GatewayError(frame.code, frame.message, frame));
    } else if (frame.op === "event") {
      const sub = this.bySub.get(frame.sub);
      if (sub) sub.deliver(frame);
      else {
        const early = this.early.get(frame.sub) || [];
        early.push(frame);
        this.early.set(frame.sub, early);
      }
    } else if (frame.op === "lagged") {
      const sub = this.bySub.get(frame.sub);
      if (sub) {
        this.bySub.delete(frame.sub);
        sub.serverId = null;
        if (frame.after !== null && frame.after !== undefined) sub.lastSeq = frame.after;
        this.open(sub);
      }
    }
  }

  async request(op, fields = {}) {
    await this.connect();
    const id = `c${this.nextId++}`;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.ws.send(JSON.stringify({ ...fields, op, id }));
    });
  }

  // Every page of `list`, in address order.
  async listAll(fields = {}) {
    const actors = [];
    let after;
    for (;;) {
      const page = await this.request("list", after === undefined ? fields : { ...fields, after });
      actors.push(...page.actors);
      if (!page.next) return actors;
      after = page.next;
    }
  }

  send(to, type, body, key) {
    const frame = { to, type, body };
    if (key) frame.key = key;
    return this.request("send", frame);
  }

  // Events of `actor` after `after` (null: live only), to `onEvent(frame)`;
  // `onError(error)` if the gateway refuses. Returns {close()}.
  subscribe(actor, after, onEvent, onError = () => {}) {
    const sub = new Subscription(this, actor, after, onEvent, onError);
    this.subs.set(sub, sub);
    this.open(sub);
    return sub;
  }

  async open(sub) {
    if (sub.ended) return;
    const fields = { actor: sub.actor };
    if (sub.lastSeq !== null) fields.after = sub.lastSeq;
    try {
      const ok = await this.request("subscribe", fields);
      if (sub.ended) {
        this.request("unsubscribe", { sub: ok.sub }).catch(() => {});
        return;
      }
      sub.serverId = ok.sub;
      this.bySub.set(ok.sub, sub);
      for (const frame of this.early.get(ok.sub) || []) sub.deliver(frame);
      this.early.delete(ok.sub);
    } catch (error) {
      if (error.code !== "closed") sub.onError(error); // closed: resubscribed on reconnect
    }
  }

  resubscribe() {
    for (const sub of this.subs.values()) if (!sub.serverId) this.open(sub);
  }
}

class Subscription {
  constructor(gateway, actor, after, onEvent, onError) {
    this.gateway = gateway;
    this.actor = actor;
    this.lastSeq = after;
    this.onEvent = onEvent;
    this.onError = onError;
    this.serverId = null;
    this.ended = false;
  }

  deliver(frame) {
    if (frame.seq !== null && frame.seq !== undefined) {
      // A pattern subscription carries many actors' seqs: only one actor's resume.
      const single = !this.actor.includes("*");
      if (single && this.lastSeq !== null && frame.seq <= this.lastSeq) return;
      if (single) this.lastSeq = frame.seq;
    }
    this.onEvent(frame);
  }

  close() {
    this.ended = true;
    this.gateway.subs.delete(this);
    if (this.serverId) {
      this.gateway.bySub.delete(this.serverId);
      this.gateway.request("unsubscribe", { sub: this.serverId }).catch(() => {});
    }
  }
}
