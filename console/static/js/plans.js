// Recent plans, newest first; a new plan or decision refreshes the list live.
import { get, live } from "./api.js";
import { append, badge, clear, clip, h, link, short, when } from "./dom.js";

const PAGE = 100;

export async function plansPage(main) {
  const body = h("tbody");
  // Older plans a page at a time; a live refresh reloads as many pages as are shown.
  let pages = 1;
  const older = h("button", { id: "older-plans", hidden: true, onclick: async () => { pages += 1; await load(); } },
    `${PAGE} older plans…`);
  append(main, h("h1", {}, "Plans"),
    h("table", { id: "plans" },
      h("thead", {}, h("tr", {}, ["plan", "prompt", "status", "decisions", "open corrections",
        "open violations", "started"].map((t) => h("th", {}, t)))), body),
    h("div", { class: "toolbar" }, older));

  async function load() {
    const plans = [];
    let last = [];
    for (let i = 0; i < pages; i++) {
      const q = new URLSearchParams({ limit: PAGE });
      if (plans.length) q.set("before", plans[plans.length - 1].root.decision_id);
      last = (await get(`/api/plans?${q}`)).plans;
      plans.push(...last);
      if (last.length < PAGE) break;
    }
    older.hidden = last.length < PAGE;
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
