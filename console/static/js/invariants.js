// Invariants: the effective set for a plan (with the precedence that chose it), every
// invariant, and violations with resolve.
import { get, live, post } from "./api.js";
import { append, badge, clear, clip, h, link, toast, when } from "./dom.js";

export async function invariantsPage(main, planId) {
  const plan = h("input", { type: "text", id: "inv-plan", placeholder: "plan ID for its effective set", size: 30, value: planId || "" });
  const unresolved = h("input", { type: "checkbox", id: "inv-unresolved", checked: true });
  const effective = h("div", { id: "effective" });
  const all = h("tbody");
  const violations = h("tbody");
  append(main, h("h1", {}, "Invariants"),
    h("div", { class: "toolbar" }, plan, h("button", { onclick: () => { window.location.hash = plan.value.trim() ? `#/invariants/${plan.value.trim()}` : "#/invariants"; } }, "Show"),
      h("label", {}, unresolved, " unresolved violations only")),
    effective,
    h("h2", {}, "Violations"), h("table", { id: "violations" }, h("thead", {}, h("tr", {}, ["violation", "invariant", "plan", "severity", "found by", "state", "reported", "details", ""].map((t) => h("th", {}, t)))), violations),
    h("h2", {}, "Every invariant"), h("table", { id: "invariants" }, h("thead", {}, h("tr", {}, ["name", "scope", "target", "created", "gate", "description"].map((t) => h("th", {}, t)))), all));
  unresolved.addEventListener("change", () => load());

  async function load() {
    const q = planId ? `?plan=${planId}` : "";
    const inv = await get(`/api/invariants${q}`);
    clear(effective);
    if (planId) {
      append(effective, h("h2", {}, "In force for plan ", link(`#/plan/${planId}`, planId)),
        h("p", { class: "dim" }, `One per name; precedence ${inv.precedence.join(" > ")}.`),
        inv.effective.length ? h("ul", {}, inv.effective.map((i) => h("li", {}, h("strong", {}, i.name), " ", h("span", { class: "badge" }, i.scope), " ", clip(i.description, 120))))
          : h("p", { class: "dim" }, "None."));
    }
    clear(all);
    for (const i of inv.invariants) append(all, h("tr", { class: planId && !i.in_force ? "dim" : "" }, h("td", {}, i.name), h("td", {}, i.scope),
      h("td", { class: "mono" }, i.scope_target ?? "-"), h("td", { class: "dim" }, when(i.created_at)), gate(i), h("td", {}, clip(i.description, 100))));
    const vq = new URLSearchParams();
    if (planId) vq.set("plan", planId);
    if (unresolved.checked) vq.set("unresolved", "1");
    const v = await get(`/api/violations?${vq}`);
    clear(violations);
    if (!v.violations.length) append(violations, h("tr", {}, h("td", { colspan: 9, class: "dim" }, "No violations.")));
    for (const x of v.violations) {
      const state = x.resolved_at ? (x.resolved_by ? `resolved by ${x.resolved_by}` : "resolved") : x.blocks ? "blocking" : "open";
      append(violations, h("tr", { dataset: { violation: x.violation_id } }, h("td", { class: "id" }, x.violation_id),
        h("td", {}, x.invariant_name ?? h("span", { class: "dim" }, "(removed)")),
        h("td", { class: "id" }, link(`#/plan/${x.plan_id}`, x.plan_id)), h("td", {}, badge(x.severity, "severity")),
        h("td", { class: "dim" }, x.found_by || "agent"), h("td", { class: x.resolved_at ? "dim" : "bad", dataset: { state: state } }, state), h("td", { class: "dim" }, when(x.reported_at)),
        h("td", {}, clip(x.details, 100)),
        h("td", {}, x.resolved_at ? null : h("button", { dataset: { action: "resolve" }, onclick: async () => {
          // Resolving unblocks the plan's Execute-phase decisions: asked, not one click.
          if (!window.confirm(`Resolve violation ${x.violation_id} of invariant ${x.invariant_name ?? x.invariant_id}?${x.blocks ? " It unblocks the plan's Execute-phase decisions." : ""}`)) return;
          try { await post(`/api/violations/${x.violation_id}/resolve`); toast("resolved"); } catch (e) { toast(e.message, true); }
          await load();
        } }, "resolve"))));
    }
  }
  await load();
  live(planId || null, (kind) => { if (kind === "violation") load(); }, main);
  return {};
}

// What the ledger does with an invariant: severity/consequence, and its check (evaluated
// by the recorder on every decision) when it has one; without, agents report it.
function gate(i) {
  const consequence = i.consequence || (i.severity === "error" ? "refuse" : "record");
  return h("td", { class: "gate" }, `${i.severity || "error"}/${consequence}`,
    i.check ? h("div", { class: "mono dim", title: i.check }, clip(i.check, 80)) : null);
}
