// Approvals: the queue of decisions held for a person (#/approvals), and the verdict
// given from a decision on its tree. A verdict is signed by the console's principal and
// judged by the workers (who may decide, on what content, until when); a refusal says
// its rule.
import { get, live, post } from "./api.js";
import { append, badge, clear, clip, h, kv, link, put, toast, when } from "./dom.js";

export async function approvalsPage(main) {
  const every = h("input", { type: "checkbox", id: "approvals-all" });
  const rows = h("tbody");
  append(main, h("h1", {}, "Approvals"),
    h("p", { class: "dim" }, "Decisions an invariant held for a person. Open one on its tree to approve or deny it."),
    h("div", { class: "toolbar" }, h("label", {}, every, " decided and expired ones too")),
    h("table", { id: "approvals" }, h("thead", {}, h("tr", {}, ["decision", "plan", "status", "what", "held by", "requested", "expires", "decided"].map((t) => h("th", {}, t)))), rows));
  every.addEventListener("change", () => load());

  async function load() {
    const found = await get(`/api/approvals${every.checked ? "?status=all" : ""}`);
    clear(rows);
    if (!found.approvals.length) append(rows, h("tr", {}, h("td", { colspan: 8, class: "dim" }, "No decision awaits approval.")));
    for (const a of found.approvals) {
      const d = a.decision || {};
      append(rows, h("tr", { dataset: { decision: a.decision_id } },
        h("td", { class: "id" }, link(`#/plan/${a.plan_id}/${a.decision_id}`, a.decision_id)),
        h("td", { class: "id" }, link(`#/plan/${a.plan_id}`, a.plan_id)), h("td", {}, badge(a.status)),
        h("td", {}, `${d.decision_type ?? ""}: ${clip(d.chosen_option ?? "", 60)}`, d.tool ? h("div", { class: "mono dim" }, clip(`${d.tool.name} ${JSON.stringify(d.tool.arguments)}`, 80)) : null),
        h("td", {}, a.invariant_names.join(", ")), h("td", { class: "dim" }, when(a.requested_at)),
        h("td", { class: "dim" }, when(a.expires_at)),
        h("td", {}, a.decided_at ? `${a.decided_by ?? "nobody"}${a.reason ? `: ${clip(a.reason, 60)}` : ""}` : "")));
    }
  }
  await load();
  live(null, (kind) => { if (kind !== "correction") load(); }, main);
  return {};
}

// The approval section of a decision's panel: empty unless the decision was held for a
// person; with the approve and deny forms while it awaits a verdict.
export function approvalSection(decisionId, onDecided) {
  const box = h("section", { id: "approval", hidden: true });
  (async () => {
    let a;
    try { a = await get(`/api/decisions/${decisionId}/approval`); } catch { return; }
    box.hidden = false;
    const facts = kv([["status", h("span", { id: "approval-status" }, a.status)], ["held by", a.invariant_names.join(", ")],
      ["requested", when(a.requested_at)], ["expires", when(a.expires_at)],
      ["decided", a.decided_at ? `${when(a.decided_at)} by ${a.decided_by ?? "nobody (expired)"}` : undefined],
      ["reason", a.reason ?? undefined], ["guidance", a.guidance ?? undefined],
      ["append correction", a.append_correction_id ? link(`#/correction/${a.append_correction_id}`, a.append_correction_id) : undefined],
      ["content digest", h("span", { class: "mono" }, a.digest)]]);
    put(box, h("h2", {}, "Approval"), facts, a.status === "requested" ? form(a) : null);
  })();

  function form(a) {
    const reason = h("input", { type: "text", id: "approval-reason", placeholder: "Why (kept on the record)", size: 40 });
    const guidance = h("textarea", { id: "approval-guidance", maxlength: 10000, placeholder: "Denial: what the agent should do instead (optional)" });
    const asAppend = h("input", { type: "checkbox", id: "approval-append" });
    const send = async (verdict, button) => {
      const body = { verdict, reason: reason.value.trim() || null };
      if (verdict === "deny") Object.assign(body, { guidance: guidance.value.trim() || null, append: asAppend.checked });
      if (!window.confirm(`${verdict === "grant" ? "Approve" : "Deny"} decision ${a.decision_id}?`)) return;
      button.disabled = true;
      try {
        const r = await post(`/api/decisions/${a.decision_id}/approval`, body);
        toast(r.status === "sent" ? "verdict sent; the workers apply it" : `${verdict}: applied`);
        onDecided();
      } catch (e) { toast(e.message, true); button.disabled = false; }
    };
    const approve = h("button", { id: "approve-decision", class: "primary", onclick: () => send("grant", approve) }, "Approve");
    const deny = h("button", { id: "deny-decision", onclick: () => send("deny", deny) }, "Deny");
    return h("div", {}, reason, guidance, h("label", {}, asAppend, " deny as an append correction carrying the guidance"),
      h("div", { class: "toolbar" }, approve, deny));
  }
  return box;
}
