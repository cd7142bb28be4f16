// A plan's tree as it was: after (or just before) a correction, or at a time. Read-only,
// computed from the ledger as `agents plan tree --as-of` does.
import { get } from "./api.js";
import { append, badge, clip, h, link, short } from "./dom.js";

export async function asOfPage(main, planId, at, before) {
  const q = new URLSearchParams({ at });
  if (before) q.set("before", "1");
  const then = await get(`/api/plans/${planId}/as-of?${q}`);
  const cut = then.cut.sequence_number !== undefined ? `as of sequence #${then.cut.sequence_number}` : `as of ${then.cut.time}`;
  const ids = new Set(then.decisions.map((d) => d.decision_id));
  const kids = new Map();
  for (const d of then.decisions) {
    const parent = ids.has(d.parent_decision_id) ? d.parent_decision_id : null;
    if (!kids.has(parent)) kids.set(parent, []);
    kids.get(parent).push(d);
  }
  const marks = new Map();
  for (const c of then.corrections) for (const id of [c.decision_id, c.new_decision_id]) {
    if (!marks.has(id)) marks.set(id, []);
    marks.get(id).push(c);
  }
  function level(parent) {
    return h("ul", {}, (kids.get(parent) || []).map((d) => h("li", {},
      h("div", { class: `node phase-${d.phase}${d.is_correction ? " is-correction" : ""}`, dataset: { id: d.decision_id } },
        h("span", { class: "toggle" }, "·"),
        h("span", { class: "type" }, d.decision_type),
        h("span", { class: "chosen", title: d.chosen_option }, clip(d.chosen_option, 100)),
        h("span", { class: "dim mono" }, `#${d.sequence_number} ${short(d.decision_id)}`),
        d.superseded_by ? h("span", { class: "dim" }, `later superseded by ${short(d.superseded_by)}`) : null,
        d.is_correction ? h("span", { class: "badge" }, `correction of ${short(d.corrects_decision_id)}`) : null,
        (marks.get(d.decision_id) || []).map((c) => h("a", { class: "badge mark", href: `#/correction/${c.correction_id}` }, `${c.mode} ${c.status}`)),
        (d.downstream_plan_ids || []).map((p) => h("a", { class: "badge childplan", href: `#/plan/${p}` }, `→ child plan ${short(p)}`))),
      kids.has(d.decision_id) ? level(d.decision_id) : null)));
  }
  const tree = level(null);
  tree.className = "tree";
  tree.id = "tree-then";
  append(main,
    h("h1", {}, "Plan ", h("span", { class: "mono" }, planId), " ", badge(before ? "before" : "as of", "cut")),
    h("p", { id: "cut" }, `Tree ${cut}${before ? " (just before the correction)" : ""}: ${then.count} decision(s), read-only. `,
      link(`#/plan/${planId}`, "back to the live tree")),
    then.count > then.decisions.length ? h("p", { class: "warn" }, `Showing the first ${then.decisions.length} of ${then.count}.`) : null,
    h("div", { class: "card" }, tree));
  return {};
}
