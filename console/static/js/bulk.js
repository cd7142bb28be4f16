// Bulk corrections: a filter (as the Search page's), its dry run as a whole (matches,
// plans, blast radius, risk, files, conflicts), then one batch requested with a reason,
// its progress followed until every correction ended, and a cancel. Earlier batches below.
import { get, post } from "./api.js";
import { append, badge, clear, h, kv, link, put, secs, toast, when } from "./dom.js";

const TYPES = ["", "prompt_definition", "invariant_enforced", "strategy_choice", "implementation_choice",
  "resource_selection", "subplan_spawn", "subplan_parallel_spawn", "tool_invocation", "error_recovery",
  "validation_response", "user_intervention"];
const STATUSES = ["", "active", "completed", "abandoned", "rolled_back"];
const STATES = ["any", "current", "superseded"];
const POLL_MS = 1000;
const ITEMS_SHOWN = 50;
const SETTLED = new Set(["completed", "partially_failed", "cancelled"]);

const counts = (c) => Object.entries(c).map(([k, v]) => `${k} ${v}`).join(", ");

function itemsTable(id, items) {
  return h("table", { id },
    h("thead", {}, h("tr", {}, ["decision", "plan", "state", "correction", "note"].map((t) => h("th", {}, t)))),
    h("tbody", {}, items.slice(0, ITEMS_SHOWN).map((i) => h("tr", { dataset: { decision: i.decision_id, state: i.state } },
      h("td", { class: "id" }, link(`#/plan/${i.plan_id}/${i.decision_id}`, i.decision_id)),
      h("td", { class: "id" }, link(`#/plan/${i.plan_id}`, i.plan_id)),
      h("td", {}, badge(i.state)),
      h("td", { class: "id" }, ["planned", "covered", "superseded", "refused", "not_requested"].includes(i.state)
        ? h("span", { class: "dim" }, "-") : link(`#/correction/${i.correction_id}`, i.correction_id)),
      h("td", { class: "dim" }, i.note || "")))));
}

export async function bulkPage(main) {
  const select = (id, label, values, empty) => h("select", { id, "aria-label": label },
    values.map((v) => h("option", { value: v }, v || empty)));
  const fields = {};
  for (const [name, hint, size] of [["text", "words", 24], ["agent", "agent", 12], ["path", "artifact path or folder", 18],
    ["since", "since (ISO time)", 16], ["until", "until (ISO time)", 16]]) {
    fields[name] = h("input", { type: "text", id: `bulk-${name}`, placeholder: hint, size, "aria-label": hint });
  }
  const type = select("bulk-type", "type", TYPES, "any type");
  const planStatus = select("bulk-plan-status", "plan status", STATUSES, "any plan status");
  const state = select("bulk-state", "current or superseded", STATES, "any");
  const mode = select("bulk-mode", "mode", ["revert", "append"], "");
  const guidance = h("input", { type: "text", id: "bulk-guidance", placeholder: "guidance (required for append)", size: 30, "aria-label": "guidance" });
  const reason = h("input", { type: "text", id: "bulk-reason", placeholder: "reason (required)", size: 30, "aria-label": "reason" });
  const previewBox = h("div", { id: "bulk-preview" });
  const progressBox = h("div", { id: "bulk-progress" });
  const listBody = h("tbody");
  let previewed = null;   // { batch_id, filter, mode, guidance }
  let timer = null;

  const filter = () => ({
    text: fields.text.value, agent: fields.agent.value, path: fields.path.value,
    since: fields.since.value, until: fields.until.value, decision_type: type.value,
    plan_status: planStatus.value, state: state.value,
  });
  const form = h("form", { class: "toolbar", id: "bulk-filter", onsubmit: async (e) => { e.preventDefault(); await doPreview(); } },
    Object.values(fields), type, planStatus, state, mode, guidance, h("button", { type: "submit" }, "Preview"));
  append(main, h("h1", {}, "Bulk corrections"),
    h("p", { class: "dim" }, "One correction per decision the filter matches, as one batch. Preview first: nothing is written until you request."),
    form, previewBox, progressBox, h("h2", {}, "Batches"),
    h("table", { id: "bulk-batches" }, h("thead", {}, h("tr", {}, ["batch", "state", "mode", "filter", "items", "requested"].map((t) => h("th", {}, t)))), listBody));

  async function doPreview() {
    clear(previewBox);
    previewed = null;
    const body = { filter: filter(), mode: mode.value, guidance: guidance.value || null };
    let found;
    try { found = await post("/api/bulk/preview", body); } catch (e) {
      append(previewBox, h("p", { class: "bad", id: "bulk-error" }, e.message)); return;
    }
    previewed = { ...body, batch_id: found.batch_id };
    const p = found.preview;
    const request = h("button", { id: "bulk-request", disabled: !p.to_request, onclick: doRequest }, `Request ${p.to_request} correction(s)`);
    append(previewBox, h("h2", {}, `Dry run: ${p.mode} of every match (nothing was changed)`),
      kv([["matches", `${p.matches} decision(s) in ${p.plans} plan(s)`],
        ["would request", String(p.to_request)],
        ["skipped", `${p.covered} covered, ${p.superseded} superseded, ${p.refused} out of scope`],
        ["risk", h("span", { id: "bulk-risk" }, badge(p.risk, "risk"), ` low ${p.risk_counts.low}, medium ${p.risk_counts.medium}, high ${p.risk_counts.high}`)],
        ["affected decisions", String(p.affected_decisions)],
        ["affected files", String(p.affected_files)],
        ["child plans", String(p.child_plans)],
        ["estimated recompute time", secs(p.estimated_recompute_time_seconds)],
        ["conflicts", h("span", { id: "bulk-conflicts" }, `${p.conflicts_count} match(es) inside another's subtree`)]]),
      p.exceeded ? h("p", { class: "warn" }, `${p.exceeded} match(es) reach more decisions than the corrections' bound; they would fail.`) : null,
      itemsTable("bulk-items", p.items),
      p.items.length > ITEMS_SHOWN ? h("p", { class: "dim" }, `… ${p.items.length - ITEMS_SHOWN} more (agents bulk preview --json lists all)`) : null,
      h("div", { class: "toolbar" }, reason, request));
  }

  async function doRequest() {
    if (!previewed) return;
    let batch;
    try {
      batch = await post("/api/bulk", { ...previewed, reason: reason.value });
    } catch (e) { toast(e.message, true); return; }
    clear(previewBox);
    follow(batch.batch_id);
  }

  function show(b) {
    const cancel = h("button", { id: "bulk-cancel", hidden: SETTLED.has(b.state), onclick: async () => {
      try { show(await post(`/api/bulk/${b.batch_id}/cancel`, {})); } catch (e) { toast(e.message, true); }
    } }, "Cancel the batch");
    put(progressBox, h("h2", {}, "Batch ", h("span", { class: "id", id: "bulk-batch-id" }, b.batch_id), " ", h("span", { id: "bulk-batch-state" }, badge(b.state))),
      kv([["filter", b.summary], ["mode", b.mode], ["reason", b.reason], ["operator", b.operator || "(unsigned)"],
        ["items", h("span", { id: "bulk-counts" }, counts(b.counts))], ["updated", when(b.updated_at)]]),
      h("div", { class: "toolbar" }, cancel), itemsTable("bulk-batch-items", b.items));
  }

  async function follow(batchId) {
    if (timer) clearTimeout(timer);
    if (!main.isConnected) return;
    let b;
    try { b = await get(`/api/bulk/${batchId}`); } catch (e) { toast(e.message, true); return; }
    if (!main.isConnected) return;
    show(b);
    await list();
    if (!SETTLED.has(b.state)) timer = setTimeout(() => follow(batchId), POLL_MS);
  }

  async function list() {
    const found = await get("/api/bulk");
    clear(listBody);
    if (!found.batches.length) append(listBody, h("tr", {}, h("td", { colspan: 6, class: "dim" }, "No batches yet.")));
    for (const b of found.batches) {
      append(listBody, h("tr", { dataset: { batch: b.batch_id } },
        h("td", { class: "id" }, h("a", { href: "#/bulk", onclick: (e) => { e.preventDefault(); follow(b.batch_id); } }, b.batch_id)),
        h("td", {}, badge(b.state)), h("td", {}, b.mode), h("td", {}, b.summary),
        h("td", {}, counts(b.counts)), h("td", { class: "dim" }, when(b.created_at))));
    }
  }
  await list();
  return {};
}
