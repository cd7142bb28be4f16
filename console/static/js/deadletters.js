// Dead letters: what the workers refused, and retrying one as it was first sent.
import { get, post } from "./api.js";
import { append, clear, clip, h, kv, link, toast, when } from "./dom.js";

export async function deadLettersPage(main) {
  const body = h("tbody");
  append(main, h("h1", {}, "Dead letters"), h("table", { id: "dead-letters" },
    h("thead", {}, h("tr", {}, ["id", "subject", "rejected", "first reason", ""].map((t) => h("th", {}, t)))), body));
  async function load() {
    const { dead_letters } = await get("/api/dead-letters");
    clear(body);
    if (!dead_letters.length) append(body, h("tr", {}, h("td", { colspan: 5, class: "dim" }, "No dead letters.")));
    for (const d of dead_letters) {
      append(body, h("tr", {}, h("td", { class: "id" }, link(`#/dead-letter/${encodeURIComponent(d.id)}`, d.id)),
        h("td", { class: "mono" }, clip(d.subject, 60)), h("td", { class: "dim" }, when(d.rejected_at)),
        h("td", {}, d.errors.length ? `${d.errors[0].rule}: ${clip(d.errors[0].message, 90)}` : "-",
          d.error_count > 1 ? h("span", { class: "dim" }, ` (+${d.error_count - 1})`) : null),
        h("td", {}, d.retryable ? h("button", { onclick: () => retry(d.id, load) }, "retry") : h("span", { class: "dim" }, "kept in part"))));
    }
  }
  await load();
  return {};
}

async function retry(id, after) {
  try { const r = await post(`/api/dead-letters/${encodeURIComponent(id)}/retry`); toast(`republished as ${r.stream}:${r.stream_sequence}`); }
  catch (e) { toast(e.message, true); }
  await after();
}

export async function deadLetterPage(main, id) {
  const d = await get(`/api/dead-letters/${encodeURIComponent(id)}`);
  append(main, h("h1", {}, "Dead letter ", h("span", { class: "mono" }, d.id)),
    h("div", { class: "card" }, kv([["subject", d.subject], ["rejected", `${when(d.rejected_at)} (delivered ${d.delivered}x)`],
      ["plan", d.plan_id ?? null], ["decision", d.decision_id ?? null],
      ["headers", Object.entries(d.headers).map(([k, v]) => `${k}: ${v}`).join("\n") || null],
      ["payload", `${d.payload_size} bytes, sha256 ${d.payload_sha256}`]])),
    h("h2", {}, "Reasons"), h("ul", {}, d.errors.map((e) => h("li", {}, h("strong", { class: "bad" }, e.rule), e.field ? ` (${e.field})` : "", `: ${e.message}`))),
    h("h2", {}, `Payload (${d.payload_encoding})`), h("pre", {}, d.payload),
    d.retryable ? h("button", { class: "primary", onclick: async () => { await retry(d.id, async () => { window.location.hash = "#/dead-letters"; }); } }, "Retry")
      : h("p", { class: "warn" }, "Kept only in part: it cannot be retried."));
  return {};
}
