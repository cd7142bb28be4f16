// Building the page from data. Everything an agent wrote (options, rationales, guidance)
// is hostile text: it only ever becomes a Text node, never HTML. There is no innerHTML
// in this front end, and the content security policy forbids inline scripts besides.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

// Unlike Element.append, skips null / undefined / false (rendered as "null" otherwise).
export function append(el, ...children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) { el.replaceChildren(); return el; }

export function put(el, ...children) { el.replaceChildren(); return append(el, ...children); }

// The tree's short form of an ID (its last 8 characters, which Find accepts); lists and
// panels show IDs whole.
export const short = (id) => (id ? "…" + id.slice(-8) : "-");

// A duration as people read it: 9.5 s, 79 s -> 1 min 19 s, 2 h 5 min.
export function secs(value) {
  const n = Number(value);
  if (!Number.isFinite(n)) return "-";
  const whole = Math.round(n);
  if (whole < 60) return n < 10 ? `${n.toFixed(1)} s` : `${whole} s`;
  if (whole < 3600) return `${Math.floor(whole / 60)} min ${whole % 60} s`;
  return `${Math.floor(whole / 3600)} h ${Math.floor((whole % 3600) / 60)} min`;
}

export function when(iso) {
  if (!iso) return "-";
  return iso.replace("T", " ").replace(/\.\d+/, "").replace("+00:00", "").replace("Z", "");
}

export function clip(text, width = 80) {
  if (text === null || text === undefined) return "";
  const one = String(text).split(/\s+/).join(" ");
  return one.length <= width ? one : one.slice(0, width - 1) + "…";
}

export function badge(status, prefix = "status") {
  return h("span", { class: `badge ${prefix}-${status}`, dataset: { status } }, status ?? "-");
}

export function toast(message, error = false) {
  const box = document.getElementById("toast");
  const item = h("div", { class: error ? "error" : "" }, message);
  box.append(item);
  setTimeout(() => item.remove(), error ? 8000 : 4000);
}

export function link(href, text, attrs = {}) { return h("a", { href, ...attrs }, text); }

export function kv(rows) {
  const dl = h("dl", { class: "kv" });
  for (const [k, v] of rows) {
    if (v === undefined) continue;
    dl.append(h("dt", {}, k), h("dd", {}, v === null || v === "" ? h("span", { class: "dim" }, "-") : v));
  }
  return dl;
}
