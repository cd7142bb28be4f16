// Plans, newest first, filtered by status, project, agent, text and time (as
// `agents plan list`); a new plan or decision refreshes the list live.
import { get, live } from "./api.js";
import { append, badge, clear, clip, h, link, when } from "./dom.js";

const PAGE = 100;
const STATUSES = ["", "active", "completed", "abandoned", "rolled_back"];

export async function plansPage(main) {
  const body = h("tbody");
  const status = h("select", { id: "plans-status", "aria-label": "status" },
    STATUSES.map((s) => h("option", { value: s }, s || "any status")));
  const fields = {};
  for (const [name, hint, size] of [["project", "project", 12], ["agent", "agent", 12],
    ["text", "words in the prompt", 20], ["since", "since (ISO time)", 16], ["until", "until (ISO time)", 16]]) {
    fields[name] = h("input", { type: "text", id: `plans-${name}`, placeholder: hint, size, "aria-label": hint });
  }
  const note = h("p", { class: "dim", id: "plans-note" });
  // Older plans a page at a time; a live refresh reloads as many pages as are shown.
  let pages = 1;
  let next = null;
  const older = h("button", { id: "older-plans", hidden: true, onclick: async () => { pages += 1; await load(); } },
    `${PAGE} older plans…`);
  const form = h("form", { class: "toolbar", id: "plans-filter", onsubmit: async (e) => { e.preventDefault(); pages = 1; await load(); } },
    status, Object.values(fields), h("button", { type: "submit" }, "Filter"));
  append(main, h("h1", {}, "Plans"), form,
    h("table", { id: "plans" },
      h("thead", {}, h("tr", {}, ["plan", "prompt", "status", "decisions", "open corrections",
        "open violations", "started"].map((t) => h("th", {}, t)))), body),
    note, h("div", { class: "toolbar" }, older));

  function query(before) {
    const q = new URLSearchParams({ limit: PAGE });
    if (status.value) q.set("status", status.value);
    for (const [name, input] of Object.entries(fields)) if (input.value.trim()) q.set(name, input.value.trim());
    if (before) q.set("before", before);
    return q;
  }

  async function load() {
    const plans = [];
    next = null;
    let found = null;
    for (let i = 0; i < pages; i++) {
      try { found = await get(`/api/plans?${query(next)}`); } catch (e) { note.textContent = e.message; return; }
      plans.push(...found.plans);
      next = found.next_before;
      if (!next) break;
    }
    older.hidden = !next;
    note.textContent = !plans.length && next ? `No match among the newest ${found.scanned} plans; older ones: the button below.` : "";
    clear(body);
    if (!plans.length) append(body, h("tr", {}, h("td", { colspan: 7, class: "dim" }, "No plans match.")));
    for (const p of plans) {
      append(body, h("tr", { dataset: { plan: p.plan_id } },
        h("td", { class: "id" }, link(`#/plan/${p.plan_id}`, p.plan_id),
          p.parent_plan_id ? h("div", { class: "dim" }, "child of ", link(`#/plan/${p.parent_plan_id}`, p.parent_plan_id)) : null),
        h("td", {}, clip(p.root.chosen_option, 90), p.project ? h("div", { class: "dim" }, p.project) : null),
        h("td", {}, badge(p.status)),
        h("td", { class: "count", dataset: { current: p.current, decisions: p.decisions } }, `${p.current}`,
          p.decisions !== p.current ? h("span", { class: "dim" }, ` (${p.decisions} with superseded)`) : null),
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
