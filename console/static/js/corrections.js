// Corrections: the list with filters (newest first; those still queued in the stream, which
// no worker has taken up, on top), and one correction's history, attempts and diff.
import { get, live, post } from "./api.js";
import { append, badge, clear, clip, h, kv, link, toast, when } from "./dom.js";

const STATUSES = ["", "pending", "analyzing", "executing", "applied", "failed", "cancelled"];
const ASK = {
  cancel: (id) => window.prompt(`Cancel correction ${id}? Why (kept in its history; optional):`),
  fail: (id) => window.prompt(`End correction ${id} as FAILED? Why (required; becomes its error):`),
  retry: (id) => window.prompt(`Retry correction ${id}? Why (kept in its history; optional):`),
};

export async function correctionsPage(main) {
  const status = h("select", { id: "filter-status" }, STATUSES.map((s) => h("option", { value: s }, s || "any status")));
  const plan = h("input", { type: "text", id: "filter-plan", placeholder: "plan ID", size: 28 });
  const body = h("tbody");
  append(main, h("h1", {}, "Corrections"),
    h("div", { class: "toolbar" }, status, plan, h("button", { onclick: () => load() }, "Filter")),
    h("table", { id: "corrections" }, h("thead", {}, h("tr", {}, ["correction", "plan", "target", "mode", "status", "by", "requested", "guidance", ""].map((t) => h("th", {}, t)))), body));
  async function load() {
    const q = new URLSearchParams();
    if (status.value) q.set("status", status.value);
    if (plan.value.trim()) q.set("plan", plan.value.trim());
    let found;
    try { found = await get(`/api/corrections?${q}`); } catch (e) { toast(e.message, true); return; }
    clear(body);
    if (!found.corrections.length) append(body, h("tr", {}, h("td", { colspan: 9, class: "dim" }, "No corrections.")));
    for (const c of found.corrections) {
      append(body, h("tr", { dataset: { correction: c.correction_id } },
        h("td", { class: "id" }, link(`#/correction/${c.correction_id}`, c.correction_id)),
        h("td", { class: "id" }, link(`#/plan/${c.plan_id}`, c.plan_id)),
        h("td", { class: "id" }, link(`#/plan/${c.plan_id}/${c.decision_id}`, c.decision_id)),
        h("td", {}, c.mode), h("td", {}, badge(c.status)), h("td", {}, c.requested_by),
        h("td", { class: "dim" }, when(c.requested_at)), h("td", {}, clip(c.guidance, 60)),
        h("td", {}, actions(c, load))));
    }
  }
  await load();
  live(null, (kind) => { if (kind === "correction") load(); }, main);
  return {};
}

export function actions(c, after) {
  const act = async (verb, reason) => {
    try { const r = await post(`/api/corrections/${c.correction_id}/${verb}`, reason ? { reason } : {}); toast(`${verb}: ${r.status || "sent"}`); }
    catch (e) { toast(e.message, true); }
    if (after) await after();
  };
  // Every command asks first, and for a reason (required to fail, optional otherwise).
  return (c.actions || []).map((verb) => h("button", { class: verb === "fail" ? "danger" : "", dataset: { action: verb }, onclick: () => {
    const why = ASK[verb](c.correction_id);
    if (why === null || (verb === "fail" && !why.trim())) return;
    act(verb, why.trim());
  } }, verb));
}

export async function correctionPage(main, id) {
  async function render() {
    const x = await get(`/api/corrections/${id}`);
    const c = x.correction; const diff = x.diff;
    clear(main);
    if (x.queued) {
      append(main, h("h1", {}, "Correction ", h("span", { class: "mono" }, c.correction_id), " ", badge("queued")),
        h("p", { class: "warn", id: "queued-note" }, "Queued in the stream: no worker has taken it up yet (are the workers running?). ",
          c.cancel_queued ? "A cancel is queued after it: it will be cancelled before it runs." : "Cancel it now and it never runs."),
        h("div", { class: "toolbar" }, c.cancel_queued ? null : actions(c, render)),
        h("div", { class: "card" }, kv([["mode", c.mode], ["plan", link(`#/plan/${c.plan_id}`, c.plan_id)],
          ["target", link(`#/plan/${c.plan_id}/${c.decision_id}`, c.decision_id)], ["requested by", c.requested_by],
          ["requested", when(c.requested_at)], ["guidance", c.guidance]])));
      return;
    }
    append(main, h("h1", {}, "Correction ", h("span", { class: "mono" }, c.correction_id), " ", badge(c.status)),
      h("div", { class: "toolbar" }, actions(c, render)),
      h("div", { class: "card" }, kv([["mode", c.mode], ["plan", link(`#/plan/${c.plan_id}`, c.plan_id)],
        ["target", link(`#/plan/${c.plan_id}/${c.decision_id}`, c.decision_id)], ["requested by", c.requested_by],
        ["requested", when(c.requested_at)], ["guidance", c.guidance], ["chosen option", c.chosen_option ?? null],
        ["new decision", c.new_decision_id ? link(`#/plan/${c.plan_id}/${c.new_decision_id}`, c.new_decision_id) : null],
        ["error", c.error ? h("span", { class: "bad" }, c.error) : null], ["archive", c.archived_artifacts_path ?? null]])),
      h("h2", {}, "History"), h("table", { id: "history" }, h("tbody", {}, c.history.map((t) => h("tr", {},
        h("td", { class: "dim" }, when(t.at)), h("td", {}, t.from_status ?? "-", " → ", badge(t.to_status)), h("td", {}, t.error || t.reason || ""))))),
      h("h2", {}, "Attempts"), x.attempts.length ? h("table", { id: "attempts" }, h("tbody", {}, x.attempts.map((a) => h("tr", {},
        h("td", { class: "mono" }, a.id), h("td", {}, badge(a.state)), h("td", { class: "dim" }, when(a.created_at)),
        h("td", { class: "dim" }, when(a.completed_at)), h("td", { class: "bad" }, a.error ?? ""))))) : h("p", { class: "dim" }, "No attempts yet."),
      h("h2", {}, "What it changed"), diffView(diff),
      c.status === "applied" ? h("p", { id: "then-links" }, "The plan's tree ",
        link(`#/plan/${c.plan_id}/as-of/${c.correction_id}/before`, "just before"), " and ",
        link(`#/plan/${c.plan_id}/as-of/${c.correction_id}`, "just after"), " this correction.") : null);
  }
  await render();
  let pending = null;
  live(null, (kind, e) => {
    if (kind !== "correction" || e.correction_id !== id || pending) return;
    pending = setTimeout(async () => { pending = null; await render(); }, 250);
  }, main);
  return {};
}

function diffView(d) {
  if (!d.applied_at) return h("p", { class: "dim", id: "diff" }, "Not applied: it changed nothing.");
  const line = (sign, b) => h("li", {}, h("span", { class: sign === "-" ? "bad" : "" }, sign, " "), b.decision_type ?? "not recorded", " ",
    clip(b.chosen_option || "", 80), " ", b.plan_id ? link(`#/plan/${b.plan_id}/${b.decision_id}`, b.decision_id) : b.decision_id);
  return h("div", { class: "card", id: "diff" },
    h("p", {}, `Applied ${when(d.applied_at)}.`),
    h("strong", {}, `superseded (${d.superseded_count})`), h("ul", {}, d.superseded.map((b) => line("-", b)),
      d.superseded_count > d.superseded.length ? h("li", { class: "dim" }, `… ${d.superseded_count - d.superseded.length} more`) : null),
    h("strong", {}, `added (${d.added.length})`), h("ul", {}, d.added.map((b) => line("+", b))),
    d.child_plans_rolled_back.length ? h("p", {}, "child plans rolled back: ", d.child_plans_rolled_back.map((p) => [link(`#/plan/${p}`, p), " "])) : null,
    d.child_plans_spawned.length ? h("p", {}, "child plans spawned: ", d.child_plans_spawned.map((p) => [link(`#/plan/${p}`, p), " "])) : null,
    d.archived_artifacts_path ? h("p", {}, "archive: ", h("span", { class: "mono" }, d.archived_artifacts_path)) : null,
    d.archive_not_copied_count ? h("div", { id: "not-copied" }, h("strong", {}, `not copied (${d.archive_not_copied_count})`),
      h("ul", {}, d.archive_not_copied.map((n) => h("li", {}, h("span", { class: "mono" }, clip(n.artifact_path, 120)), ": ", n.skipped)),
        d.archive_not_copied_count > d.archive_not_copied.length ? h("li", { class: "dim" }, `… ${d.archive_not_copied_count - d.archive_not_copied.length} more (the manifest lists them all)`) : null)) : null);
}
