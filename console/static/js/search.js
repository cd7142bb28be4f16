// Search: decisions across plans by words, type, agent, artifact path, time, plan status
// and currency (as `agents search`), newest first, older ones a page at a time. The
// header's search box opens this page with its words.
import { get } from "./api.js";
import { append, badge, clear, clip, h, link, when } from "./dom.js";

const PAGE = 50;
const TYPES = ["", "prompt_definition", "invariant_enforced", "strategy_choice", "implementation_choice",
  "resource_selection", "subplan_spawn", "subplan_parallel_spawn", "tool_invocation", "error_recovery",
  "validation_response", "user_intervention"];
const STATUSES = ["", "active", "completed", "abandoned", "rolled_back"];
const STATES = ["any", "current", "superseded"];

function agentCell(d) {
  const named = d.agent ? d.agent.name : null;
  if (!d.recorded_by) return h("td", {}, named || "-", h("div", { class: "dim" }, "unsigned"));
  return h("td", {}, d.recorded_by, named && named !== d.recorded_by ? h("div", { class: "dim" }, `says ${named}`) : null);
}

export async function searchPage(main, words) {
  const body = h("tbody");
  const select = (id, label, values, empty) => h("select", { id, "aria-label": label },
    values.map((v) => h("option", { value: v }, v || empty)));
  const type = select("search-type", "type", TYPES, "any type");
  const planStatus = select("search-plan-status", "plan status", STATUSES, "any plan status");
  const state = select("search-state", "current or superseded", STATES, "any");
  const fields = {};
  for (const [name, hint, size] of [["text", "words", 24], ["agent", "agent", 12], ["path", "artifact path or folder", 18],
    ["since", "since (ISO time)", 16], ["until", "until (ISO time)", 16]]) {
    fields[name] = h("input", { type: "text", id: `search-${name}`, placeholder: hint, size, "aria-label": hint });
  }
  fields.text.value = words || "";
  const note = h("p", { class: "dim", id: "search-note" });
  let next = null;
  const older = h("button", { id: "older-decisions", hidden: true, onclick: () => load(next) }, `${PAGE} older decisions…`);
  const form = h("form", { class: "toolbar", id: "search-filter", onsubmit: async (e) => { e.preventDefault(); await load(null); } },
    Object.values(fields), type, planStatus, state, h("button", { type: "submit" }, "Search"));
  append(main, h("h1", {}, "Search"), form,
    h("table", { id: "search-results" },
      h("thead", {}, h("tr", {}, ["decision", "type", "agent", "question", "chosen", "plan", "created"].map((t) => h("th", {}, t)))), body),
    note, h("div", { class: "toolbar" }, older));

  function query(before) {
    const q = new URLSearchParams({ limit: PAGE });
    for (const [name, input] of Object.entries(fields)) if (input.value.trim()) q.set(name, input.value.trim());
    if (type.value) q.set("type", type.value);
    if (planStatus.value) q.set("plan_status", planStatus.value);
    if (state.value !== "any") q.set("state", state.value);
    if (before) q.set("before", before);
    return q;
  }

  async function load(before) {
    let found;
    try { found = await get(`/api/search?${query(before)}`); } catch (e) { note.textContent = e.message; return; }
    if (!before) clear(body);
    next = found.next_before;
    older.hidden = !next;
    note.textContent = !found.decisions.length && next ? `No match among the ${found.scanned} decisions looked at; older ones: the button below.` : "";
    if (!before && !found.decisions.length) append(body, h("tr", {}, h("td", { colspan: 7, class: "dim" }, "No decisions match.")));
    for (const d of found.decisions) {
      append(body, h("tr", { dataset: { decision: d.decision_id } },
        h("td", { class: "id" }, link(`#/plan/${d.plan_id}/${d.decision_id}`, d.decision_id),
          d.superseded_by ? h("div", { class: "dim" }, "superseded") : null),
        h("td", {}, d.decision_type),
        agentCell(d),
        h("td", {}, clip(d.question, 80)),
        h("td", {}, clip(d.chosen_option, 80)),
        h("td", { class: "id" }, link(`#/plan/${d.plan_id}`, d.plan_id), " ", badge(d.plan_status)),
        h("td", { class: "dim" }, when(d.created_at))));
    }
  }
  await load(null);
  return {};
}
