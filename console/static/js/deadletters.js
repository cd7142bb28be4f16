// Dead letters: what the workers refused. A retry is offered only where it can succeed
// (otherwise the page says why and offers Discard); both work on one letter or on every
// letter a filter (rule, plan) matches, as `agents dead-letters retry | discard` do.
import { get, post } from "./api.js";
import { append, clear, clip, h, kv, link, toast, when } from "./dom.js";

function askReason(what) {
  const why = window.prompt(`Discard ${what}? Why (required; kept with the letter):`);
  return why && why.trim() ? why.trim() : null;
}

async function discard(id, after) {
  const reason = askReason(`dead letter ${id}`);
  if (!reason) return;
  try { await post(`/api/dead-letters/${encodeURIComponent(id)}/discard`, { reason }); toast("discard sent; the workers record it"); }
  catch (e) { toast(e.message, true); return; }
  later(after);
}

// A discard is recorded by a worker: the list is read again a few times after it.
function later(after) {
  for (const ms of [600, 1500, 3000, 6000]) setTimeout(after, ms);
}

async function retry(id, after) {
  try { const r = await post(`/api/dead-letters/${encodeURIComponent(id)}/retry`); toast(`republished as ${r.stream}:${r.stream_sequence}`); }
  catch (e) { toast(e.message, true); }
  await after();
}

export async function deadLettersPage(main) {
  const body = h("tbody");
  const rule = h("input", { type: "text", id: "dl-rule", placeholder: "rule, e.g. max_deliveries", size: 22, "aria-label": "rule" });
  const plan = h("input", { type: "text", id: "dl-plan", placeholder: "plan ID", size: 28, "aria-label": "plan" });
  const discarded = h("input", { type: "checkbox", id: "dl-discarded" });
  const filter = () => { const f = {}; if (rule.value.trim()) f.rule = rule.value.trim(); if (plan.value.trim()) f.plan = plan.value.trim().toUpperCase(); return f; };
  const bulkRetry = h("button", { id: "dl-retry-all", onclick: async () => {
    const f = filter();
    if (!f.rule && !f.plan) { toast("Give a rule or a plan: a bulk retry needs a filter.", true); return; }
    if (!window.confirm(`Retry every dead letter matching ${JSON.stringify(f)} that a retry can fix?`)) return;
    try {
      const r = await post("/api/dead-letters/retry", f);
      const done = r.outcomes.filter((o) => o.retried).length;
      toast(`${done} retried, ${r.outcomes.length - done} kept`);
    } catch (e) { toast(e.message, true); }
    await load();
  } }, "Retry matching");
  const bulkDiscard = h("button", { id: "dl-discard-all", class: "danger", onclick: async () => {
    const f = filter();
    if (!f.rule && !f.plan) { toast("Give a rule or a plan: a bulk discard needs a filter.", true); return; }
    const reason = askReason(`every dead letter matching ${JSON.stringify(f)}`);
    if (!reason) return;
    try { const r = await post("/api/dead-letters/discard", { ...f, reason }); toast(`${r.discarded.length} discard(s) sent`); }
    catch (e) { toast(e.message, true); return; }
    later(load);
  } }, "Discard matching…");
  append(main, h("h1", {}, "Dead letters"),
    h("form", { class: "toolbar", onsubmit: async (e) => { e.preventDefault(); await load(); } },
      rule, plan, h("label", {}, discarded, " discarded ones"), h("button", { type: "submit" }, "Filter"), bulkRetry, bulkDiscard),
    h("table", { id: "dead-letters" },
      h("thead", {}, h("tr", {}, ["id", "subject", "rejected", "first reason", ""].map((t) => h("th", {}, t)))), body));
  discarded.addEventListener("change", () => load());

  async function load() {
    const q = new URLSearchParams(filter());
    if (discarded.checked) q.set("discarded", "1");
    let found;
    try { found = (await get(`/api/dead-letters?${q}`)).dead_letters; } catch (e) { toast(e.message, true); return; }
    clear(body);
    if (!found.length) append(body, h("tr", {}, h("td", { colspan: 5, class: "dim" }, discarded.checked ? "No discarded dead letters." : "No dead letters.")));
    for (const d of found) {
      append(body, h("tr", { dataset: { letter: d.id } }, h("td", { class: "id" }, link(`#/dead-letter/${encodeURIComponent(d.id)}`, d.id)),
        h("td", { class: "mono" }, d.subject), h("td", { class: "dim" }, when(d.rejected_at)),
        h("td", {}, d.errors.length ? `${d.errors[0].rule}: ${clip(d.errors[0].message, 90)}` : "-",
          d.error_count > 1 ? h("span", { class: "dim" }, ` (+${d.error_count - 1})`) : null),
        h("td", { class: "actions" }, d.discarded_at ? h("span", { class: "dim" }, `discarded by ${d.discarded_by}: ${d.discard_reason}`) : [
          d.retryable ? h("button", { dataset: { action: "retry" }, onclick: () => retry(d.id, load) }, "retry")
            : h("span", { class: "dim not-retryable", title: d.not_retryable }, "no retry can fix it "),
          h("button", { dataset: { action: "discard" }, onclick: () => discard(d.id, load) }, "discard")])));
    }
  }
  await load();
  return {};
}

export async function deadLetterPage(main, id) {
  const d = await get(`/api/dead-letters/${encodeURIComponent(id)}`);
  const back = async () => { window.location.hash = "#/dead-letters"; };
  append(main, h("h1", {}, "Dead letter ", h("span", { class: "mono" }, d.id)),
    h("div", { class: "card" }, kv([["subject", d.subject], ["rejected", `${when(d.rejected_at)} (delivered ${d.delivered}x)`],
      ["plan", d.plan_id ?? null], ["decision", d.decision_id ?? null],
      ["discarded", d.discarded_at ? `by ${d.discarded_by} ${when(d.discarded_at)}: ${d.discard_reason}` : undefined],
      ["headers", Object.entries(d.headers).map(([k, v]) => `${k}: ${v}`).join("\n") || null],
      ["payload", `${d.payload_size} bytes, sha256 ${d.payload_sha256}`]])),
    h("h2", {}, "Reasons"), h("ul", {}, d.errors.map((e) => h("li", {}, h("strong", { class: "bad" }, e.rule), e.field ? ` (${e.field})` : "", `: ${e.message}`))),
    h("h2", {}, `Payload (${d.payload_encoding})`), h("pre", {}, d.payload),
    d.discarded_at ? null : h("div", { class: "toolbar" },
      d.retryable ? h("button", { class: "primary", onclick: () => retry(d.id, back) }, "Retry")
        : h("p", { class: "warn", id: "not-retryable" }, d.not_retryable),
      h("button", { class: "danger", onclick: () => discard(d.id, back) }, "Discard…")));
  return {};
}
