// The console's JSON API and its live stream. Writes are POSTs with a JSON body: the
// server refuses anything else, so a page on another site cannot forge one.

export class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function call(method, path, body) {
  const init = { method, headers: { Accept: "application/json" }, credentials: "same-origin" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  let data = null;
  try { data = await response.json(); } catch { data = null; }
  if (response.status === 401) { window.location.href = "/login"; }
  if (!response.ok) throw new ApiError(response.status, (data && data.error) || response.statusText);
  return data;
}

export const get = (path) => call("GET", path);
export const post = (path, body = {}) => call("POST", path, body);

// One EventSource per open page, filtered by plan on the server.
let source = null;
const handlers = new Set();

// `owner`: the page's box; a page the operator already left opens nothing.
export function live(plan, onEvent, owner) {
  if (owner && !owner.isConnected) return;
  stopLive();
  const url = plan ? `/api/events?plan=${encodeURIComponent(plan)}` : "/api/events";
  source = new EventSource(url);
  const badge = document.getElementById("live");
  source.onopen = () => { badge.classList.add("on"); badge.classList.remove("off"); };
  source.onerror = () => { badge.classList.remove("on"); badge.classList.add("off"); };
  for (const kind of ["decision", "correction", "violation", "approval", "hold"]) {
    source.addEventListener(kind, (e) => {
      let data;
      try { data = JSON.parse(e.data); } catch { return; }
      onEvent(kind, data);
    });
  }
  handlers.add(onEvent);
}

export function stopLive() {
  if (source) { source.close(); source = null; }
  handlers.clear();
  const badge = document.getElementById("live");
  if (badge) { badge.classList.remove("on"); badge.classList.add("off"); }
}
