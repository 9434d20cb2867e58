// Building the page's elements. Every text from the gateway goes in as text
// (textContent), never as HTML: a model's answer or a tool's output may hold
// markup, and it must show as written.

export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name === "className") element.className = value;
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  append(element, children);
  return element;
}

export function append(element, children) {
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

export function clear(element) {
  element.replaceChildren();
  return element;
}

// JSON for a person: arguments arrive as a JSON string from the model.
export function pretty(value) {
  if (typeof value === "string") {
    try {
      return JSON.stringify(JSON.parse(value), null, 2);
    } catch {
      return value;
    }
  }
  return JSON.stringify(value, null, 2);
}

export function when(at) {
  if (!at) return "";
  const date = new Date(at);
  return Number.isNaN(date.getTime()) ? String(at) : date.toLocaleTimeString();
}

export function kindOf(address) {
  return String(address).split("/")[0];
}

export function actorLink(address) {
  return h("a", { href: `#/actor/${address}`, className: "address" }, address);
}

// A key for `send`, so that a click sent twice (a retry after a dropped
// connection) is delivered once.
export function freshKey(prefix) {
  const random = globalThis.crypto && crypto.randomUUID ? crypto.randomUUID()
    : `${Date.now()}-${Math.random().toString(16).slice(2)}`;
  return `${prefix}-${random}`;
}

// What the view shows when the gateway refused: its own sentence.
export function failure(error) {
  return h("p", { className: "error" }, error.code ? `${error.code}: ${error.message}` : String(error));
}

// An op the server does not have yet (an older server) is `bad_request` naming the op.
export function unsupported(error) {
  return error && error.code === "bad_request" && /unknown op/.test(error.message || "");
}
