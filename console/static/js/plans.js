// Recent plans, newest first; a new plan or decision refreshes the list live.
import { get, live } from "./api.js";
import { append, badge, clear, clip, h, link, short, when } from "./dom.js";

export async function plansPage(main) {
  const body = h("tbody");
  append(main, h("h1", {}, "Plans"),
    h("table", { id: "plans" },
      h("thead", {}, h("tr", {}, ["plan", "prompt", "status", "decisions", "open corrections",
        "open violations", "started"].map((t) => h("th", {}, t)))), body));

  async function load() {
    const { plans } = await get("/api/plans?limit=100");
    clear(body);
    if (!plans.length) append(body, h("tr", {}, h("td", { colspan: 7, class: "dim" }, "No plans recorded yet.")));
    for (const p of plans) {
      append(body, h("tr", { dataset: { plan: p.plan_id } },
        h("td", { class: "id" }, link(`#/plan/${p.plan_id}`, p.plan_id),
          p.parent_plan_id ? h("div", { class: "dim" }, "child of ", link(`#/plan/${p.parent_plan_id}`, short(p.parent_plan_id))) : null),
        h("td", {}, clip(p.root.chosen_option, 90)),
        h("td", {}, badge(p.status)),
        h("td", { class: "count" }, `${p.current}`, p.decisions !== p.current ? h("span", { class: "dim" }, ` (${p.decisions} with superseded)`) : null),
        h("td", { class: p.open_corrections ? "warn" : "dim" }, String(p.open_corrections)),
        h("td", { class: p.open_violations ? "bad" : "dim" }, String(p.open_violations)),
        h("td", { class: "dim" }, when(p.root.created_at))));
    }
  }
  await load();
  let pending = null;
  live(null, () => {
    // Coalesce a burst of events into one reload a moment later.
    if (pending) return;
    pending = setTimeout(async () => { pending = null; await load(); }, 400);
  }, main);
  return {};
}
