// A plan's tree, one level at a time, live; the decision panel; correcting from the tree.
import { approvalSection } from "./approvals.js";
import { get, live, post } from "./api.js";
import { append, badge, clear, clip, h, kv, link, put, secs, short, toast, when } from "./dom.js";

const PAGE = 100;
const AFFECTED_ASK = 1000;  // decision IDs per /affected request (the server's bound)
const TERMINAL = new Set(["applied", "failed", "cancelled"]);

export async function planPage(main, planId, selected) {
  const plan = await get(`/api/plans/${planId}`);
  const state = { planId, superseded: false, nodes: new Map(), selected: null, report: null,
    following: null, awaiting: new Set() };
  // Decisions held for a person's approval are marked on the tree.
  const held = async () => {
    const found = await get(`/api/approvals?plan=${planId}`).catch(() => ({ approvals: [] }));
    state.awaiting = new Set(found.approvals.map((a) => a.decision_id));
    for (const [id, s] of state.nodes) s.view.classList.toggle("awaiting-approval", state.awaiting.has(id));
  };
  const treeRoot = h("ul", { class: "tree", id: "tree" });
  const panel = h("div", { class: "card panel", id: "panel" }, h("p", { class: "dim" }, "Pick a decision in the tree."));
  const summary = h("span", { class: "dim", id: "plan-summary" });
  const superseded = h("input", { type: "checkbox", id: "show-superseded" });
  superseded.addEventListener("change", async () => { state.superseded = superseded.checked; await reload(); });
  const asOf = h("input", { type: "text", id: "as-of", placeholder: "as of: correction ID or 2026-11-30T12:00:00Z", size: 30 });
  const asOfGo = h("button", { id: "as-of-go", onclick: () => {
    if (asOf.value.trim()) window.location.hash = `#/plan/${planId}/as-of/${encodeURIComponent(asOf.value.trim())}`;
  } }, "Show then");
  const record = plan.record;
  const status = record ? record.status : "active";
  // Marking the plan completed or abandoned: published, recorded by the workers with who
  // and why; the record (and this page) changes once one has applied it.
  const end = async (verb, done) => {
    const reason = window.prompt(`Mark plan ${planId} ${done}? Why (kept with the plan; optional):`);
    if (reason === null) return;
    try { await post(`/api/plans/${planId}/${verb}`, reason.trim() ? { reason } : {}); toast(`${done}: sent; the workers record it`); }
    catch (e) { toast(e.message, true); }
  };
  append(main,
    h("h1", {}, "Plan ", h("span", { class: "mono" }, planId), " ", badge(status)),
    h("div", { class: "toolbar", id: "plan-actions" },
      status === "active" ? [h("button", { id: "complete-plan", onclick: () => end("complete", "completed") }, "Mark completed…"),
        h("button", { id: "abandon-plan", onclick: () => end("abandon", "abandoned") }, "Abandon…")] : null,
      record && record.ended_at ? h("span", { class: "dim" }, `${record.status} by ${record.ended_by} ${when(record.ended_at)}${record.end_reason ? `: ${record.end_reason}` : ""}`) : null,
      h("a", { href: `/api/plans/${planId}/export`, id: "export-plan", download: `plan-${planId}.json` }, "Export JSON")),
    record && record.parent_plan_id ? h("p", {}, "Child plan of ", link(`#/plan/${record.parent_plan_id}`, record.parent_plan_id),
      ", spawned by decision ", link(`#/plan/${record.parent_plan_id}/${record.spawned_from_decision_id}`, record.spawned_from_decision_id),
      record.guidance ? [" with guidance: ", h("q", {}, clip(record.guidance, 200))] : null) : null,
    h("div", { class: "toolbar" }, summary,
      h("label", {}, superseded, " show superseded"), asOf, asOfGo,
      link(`#/corrections`, "corrections"), link(`#/invariants/${planId}`, "invariants"),
      h("span", { class: "legend" },
        h("span", {}, h("i", { class: "sw-strat" }), "Strategize"),
        h("span", {}, h("i", { class: "sw-exec" }), "Execute"),
        h("span", {}, h("i", { class: "sw-any" }), "Any / correction"),
        h("span", {}, h("i", { class: "sw-hl" }), "affected by the dry run"))),
    h("div", { class: "layout" }, h("div", { class: "card" }, treeRoot), panel));

  function setSummary(p) {
    summary.textContent = `${p.current} current decision(s), ${p.decisions - p.current} superseded, ` +
      `${p.open_corrections} correction(s) in flight, ${p.open_violations} open violation(s)`;
  }
  setSummary(plan);

  // --- the tree ---------------------------------------------------------------------

  function nodeView(n) {
    const classes = ["node", `phase-${n.phase}`];
    if (n.superseded_by) classes.push("superseded");
    if (n.is_correction) classes.push("is-correction");
    if (state.awaiting.has(n.decision_id)) classes.push("awaiting-approval");
    const toggle = h("span", { class: "toggle" }, n.child_count ? "▸" : "·");
    const el = h("div", { class: classes.join(" "), dataset: { id: n.decision_id, type: n.decision_type }, tabindex: 0 },
      toggle,
      h("span", { class: "type", title: `${n.decision_type} (${n.phase})` }, n.decision_type),
      h("span", { class: "chosen", title: n.chosen_option }, clip(n.chosen_option, 100)),
      h("span", { class: "dim mono", title: n.decision_id }, `#${n.sequence_number} ${short(n.decision_id)}`),
      n.confidence_score !== null ? h("span", { class: "dim" }, `conf ${n.confidence_score.toFixed(2)}`) : null,
      n.child_count ? h("span", { class: "dim count" }, `${n.child_count} below`) : null,
      n.superseded_by ? h("span", { class: "bad" }, `superseded by ${short(n.superseded_by)}`) : null,
      n.is_correction ? h("span", { class: "badge" }, `correction of ${short(n.corrects_decision_id)}`) : null,
      n.corrections.map((c) => h("a", { class: "badge mark", href: `#/correction/${c.correction_id}`,
        onclick: (e) => e.stopPropagation() }, `${c.mode} ${c.status}`)),
      n.child_plans.map((p) => h("a", { class: "badge childplan", href: `#/plan/${p.plan_id}`, dataset: { plan: p.plan_id },
        onclick: (e) => e.stopPropagation() }, `→ child plan ${short(p.plan_id)}`, p.status ? ` (${p.status})` : "")));
    toggle.addEventListener("click", (e) => { e.stopPropagation(); toggleNode(n.decision_id); });
    el.addEventListener("click", () => { window.location.hash = `#/plan/${planId}/${n.decision_id}`; });
    el.addEventListener("keydown", (e) => { if (e.key === "Enter") el.click(); });
    return el;
  }

  function render(n, fresh = false) {
    const view = nodeView(n);
    if (fresh) view.classList.add("fresh");
    const kids = h("ul", { hidden: true });
    const li = h("li", {}, view, kids);
    const old = state.nodes.get(n.decision_id);
    state.nodes.set(n.decision_id, { data: n, li, view, kids, expanded: false, loaded: false,
      fresh: old === undefined });
    markReport(n.decision_id);
    return li;
  }

  async function loadLevel(parent, ul, after = null, known = null) {
    const q = new URLSearchParams({ limit: PAGE, superseded: state.superseded ? "1" : "0" });
    if (parent) q.set("parent", parent);
    if (after !== null) q.set("after", after);
    const level = await get(`/api/plans/${planId}/tree?${q}`);
    for (const n of level.nodes) append(ul, render(n, known !== null && !known.has(n.decision_id)));
    await askAffected(level.nodes.map((n) => n.decision_id));
    if (level.next_after !== null) {
      const more = h("li", { class: "more" }, h("button", { onclick: async () => { more.remove(); await loadLevel(parent, ul, level.next_after); } },
        `load ${PAGE} more…`));
      append(ul, more);
    }
    return level.nodes;
  }

  async function expand(id, known = null) {
    const s = state.nodes.get(id);
    if (!s || !s.data.child_count) return;
    if (!s.loaded) { clear(s.kids); await loadLevel(id, s.kids, null, known); s.loaded = true; }
    s.kids.hidden = false; s.expanded = true; s.view.querySelector(".toggle").textContent = "▾";
  }

  function collapse(id) {
    const s = state.nodes.get(id);
    s.kids.hidden = true; s.expanded = false; s.view.querySelector(".toggle").textContent = "▸";
  }

  async function toggleNode(id) {
    const s = state.nodes.get(id);
    if (s && s.expanded) collapse(id); else await expand(id);
  }

  // Reload everything shown, keeping what was open open; new nodes flash.
  async function reload() {
    const open = [...state.nodes.values()].filter((s) => s.expanded).map((s) => s.data.decision_id);
    // The first load flashes nothing; later ones flash what was not shown before.
    const known = state.nodes.size ? new Set(state.nodes.keys()) : null;
    state.nodes.clear();
    const fresh = h("ul", { class: "tree", id: "tree" });
    const roots = await loadLevel(null, fresh, null, known);
    put(treeRoot, ...fresh.childNodes);
    const wanted = open.length ? open : roots.map((r) => r.decision_id);
    for (const id of wanted) {
      let s = state.nodes.get(id);
      if (!s) continue;
      await expand(id, known);
    }
    const p = await get(`/api/plans/${planId}`);
    setSummary(p);
    if (state.selected) markSelected();
  }

  // Reload one level (a decision arrived under it).
  async function reloadChildren(parentId) {
    const s = state.nodes.get(parentId);
    if (!s) return;
    const known = new Set(state.nodes.keys());
    const level = await get(`/api/plans/${planId}/tree?${new URLSearchParams({ parent: parentId, limit: PAGE, superseded: state.superseded ? "1" : "0" })}`);
    s.data.child_count = level.nodes.length + (level.next_after !== null ? 1 : 0);
    const open = new Set([...state.nodes.values()].filter((x) => x.expanded).map((x) => x.data.decision_id));
    if (!s.expanded) {
      // Shown collapsed: only its count changes.
      const li = s.li; const view = nodeView(s.data); li.replaceChild(view, s.view); s.view = view; s.loaded = false;
      return;
    }
    clear(s.kids);
    for (const n of level.nodes) append(s.kids, render(n, !known.has(n.decision_id)));
    for (const n of level.nodes) if (open.has(n.decision_id)) await expand(n.decision_id, known);
    s.view.querySelector(".toggle").textContent = "▾";
    if (state.selected) markSelected();
  }

  // --- live -------------------------------------------------------------------------

  const queue = new Map();
  function later(key, fn) {
    if (queue.has(key)) return;
    queue.set(key, setTimeout(async () => { queue.delete(key); try { await fn(); } catch (e) { toast(e.message, true); } }, 250));
  }
  live(planId, (kind, e) => {
    if (kind === "decision") {
      later("held", held);
      if (!e.parent_decision_id || !state.nodes.has(e.parent_decision_id)) later("all", reload);
      else later(e.parent_decision_id, () => reloadChildren(e.parent_decision_id));
    } else if (kind === "correction") {
      if (state.following && e.correction_id === state.following.id) followed(e);
      // Applied: reload, and open the way down to what it added (a replacement, or the
      // user_intervention naming an append's child plan) so it is in view.
      if (e.to_status === "applied") later(`applied:${e.correction_id}`, async () => { 
        await reload();
        if (e.new_decision_id) await reveal(e.new_decision_id);
        if (state.selected) await select(state.selected);  // its status changed too
      });
      else later("summary", async () => setSummary(await get(`/api/plans/${planId}`)));
    } else if (kind === "approval" || kind === "hold") {
      later("held", held);
      if (state.selected === e.decision_id) later(`panel:${e.decision_id}`, () => select(e.decision_id));
      later("summary", async () => setSummary(await get(`/api/plans/${planId}`)));
    } else {
      later("summary", async () => setSummary(await get(`/api/plans/${planId}`)));
    }
  }, main);

  async function reveal(id) {
    const x = await get(`/api/decisions/${id}`);
    for (const p of x.path) if (state.nodes.has(p.decision_id)) await expand(p.decision_id);
  }

  // --- the decision panel -------------------------------------------------------------

  function markSelected() {
    treeRoot.querySelectorAll(".node.selected").forEach((el) => el.classList.remove("selected"));
    const s = state.nodes.get(state.selected);
    if (s) s.view.classList.add("selected");
  }

  async function select(id) {
    state.selected = id || null;
    markSelected();
    if (!id) { put(panel, h("p", { class: "dim" }, "Pick a decision in the tree.")); return; }
    let x;
    try { x = await get(`/api/decisions/${id}`); } catch (e) { put(panel, h("p", { class: "bad" }, e.message)); return; }
    const d = x.decision;
    if (d.plan_id !== planId) { window.location.hash = `#/plan/${d.plan_id}/${id}`; return; }
    // Reveal it: open the path from the root down to it.
    for (const p of x.path) if (state.nodes.has(p.decision_id)) await expand(p.decision_id);
    markSelected();
    const snap = d.context_snapshot || {};
    // Under the tree (a narrow window), the panel is out of sight: bring it in.
    const below = window.matchMedia("(max-width: 1000px)").matches;
    put(panel, 
      h("h2", { id: "decision-title" }, d.decision_type, " ", h("span", { class: "dim mono" }, `#${d.sequence_number}`)),
      kv([["decision", h("span", { class: "mono" }, d.decision_id)], ["type", `${d.decision_type} (${d.phase})`],
        ["question", d.question], ["chosen", h("span", { id: "decision-chosen" }, d.chosen_option)],
        ["confidence", d.confidence_score], ["rationale", h("span", { id: "decision-rationale" }, d.rationale ?? "")],
        ["created", when(d.created_at)],
        ["recorded by", x.recorded_by ?? h("span", { class: "dim" }, "unverified (recorded unsigned)")],
        ["agent", d.agent ? `${d.agent.name} ${d.agent.version ?? ""}`.trim() + " (as it says)" : undefined],
        ["model", d.model ? `${d.model.provider} ${d.model.name}` : undefined],
        ["status", d.superseded_by ? h("span", { class: "bad" }, "superseded by ", link(`#/plan/${planId}/${d.superseded_by}`, d.superseded_by),
          d.superseded_by_correction ? [" (correction ", link(`#/correction/${d.superseded_by_correction}`, d.superseded_by_correction), `, ${when(d.superseded_at)})`] : "") : "current"],
        ["corrects", d.is_correction ? link(`#/plan/${planId}/${d.corrects_decision_id}`, d.corrects_decision_id) : undefined],
        ["correction reason", d.is_correction ? d.correction_reason : undefined],
        ["project", d.project ?? undefined]]),
      h("section", {}, h("h2", {}, "Path from the root"), h("ol", { class: "path" },
        [...x.path, d].map((p) => h("li", {}, link(`#/plan/${planId}/${p.decision_id}`, `${p.decision_type}: ${clip(p.chosen_option, 60)}`))))),
      h("section", {}, h("h2", {}, "Alternatives considered"), h("ul", {},
        d.alternatives_considered.length ? d.alternatives_considered.map((a) => h("li", {}, a)) : h("li", { class: "dim" }, "none"))),
      h("section", {}, h("h2", {}, "Downstream"), h("ul", {},
        x.children.map((c) => h("li", {}, "child ", link(`#/plan/${planId}/${c.decision_id}`, `${c.decision_type}: ${clip(c.chosen_option, 50)}`), c.superseded_by ? h("span", { class: "bad" }, " superseded") : null)),
        x.downstream_decisions.map((c) => h("li", {}, "dependent ", link(`#/plan/${c.plan_id}/${c.decision_id}`, `${c.decision_type} ${c.decision_id}`))),
        x.child_plans.map((p) => h("li", {}, "child plan ", link(`#/plan/${p.plan_id}`, p.plan_id), " ", badge(p.status))),
        d.artifacts_produced.map((a) => h("li", {}, `artifact ${a.artifact_type} `, h("span", { class: "mono" }, a.artifact_path))),
        !(x.children.length || x.downstream_decisions.length || x.child_plans.length || d.artifacts_produced.length) ? h("li", { class: "dim" }, "nothing") : null)),
      x.corrections.length ? h("section", {}, h("h2", {}, "Corrections"), h("ul", {}, x.corrections.map((c) =>
        h("li", {}, link(`#/correction/${c.correction_id}`, c.correction_id), ` ${c.mode} (${c.decision_id === d.decision_id ? "target" : "result"}) `, badge(c.status), ` by ${c.requested_by}: `, clip(c.guidance, 80))))) : null,
      approvalSection(d.decision_id, async () => { await held(); await select(d.decision_id); }),
      commentsView(d, x.comments || []),
      h("section", {}, h("h2", {}, "Context snapshot"), kv([["hot context hash", snap.hot_context_hash], ["hot context ref", snap.hot_context_ref],
        ["actor state ref", snap.actor_state_ref ?? null],
        ["resources", (snap.relevant_resources || []).map((r) => `${r.resource_id} ${r.path ?? ""}`).join("\n") || null]])),
      d.actor_reasoning ? h("details", {}, h("summary", {}, "Actor reasoning"), h("pre", {}, d.actor_reasoning)) : null,
      d.superseded_by ? null : correctForm(d),
      state.following && state.following.decision === id ? h("section", { class: "correct" }, h("h2", {}, "Correction in progress"), state.following.out) : null);
    if (below) panel.scrollIntoView({ block: "start" });
  }

  // --- comments ---------------------------------------------------------------------

  // Comments on a decision without correcting it: who (as the workers verified it) and
  // when; a new one is published and shows once a worker has recorded it.
  function commentsView(d, comments) {
    const text = h("textarea", { id: "comment-text", maxlength: 4000, placeholder: "A comment on this decision (it changes nothing in the tree)" });
    const add = h("button", { id: "add-comment", onclick: async () => {
      if (!text.value.trim()) { toast("Write the comment first.", true); return; }
      add.disabled = true;
      try {
        await post(`/api/decisions/${d.decision_id}/comments`, { text: text.value });
        text.value = "";
        toast("comment sent; it shows once a worker has recorded it");
        // Shown once recorded: asked again for a few seconds, then left to a reload.
        for (let i = 0; i < 20; i++) {
          await new Promise((r) => setTimeout(r, 500));
          if (state.selected !== d.decision_id) return;
          const now = await get(`/api/decisions/${d.decision_id}`);
          if ((now.comments || []).length > comments.length) { await select(d.decision_id); return; }
        }
      } catch (e) { toast(e.message, true); }
      finally { add.disabled = false; }
    } }, "Add comment");
    return h("section", { id: "comments" }, h("h2", {}, `Comments (${comments.length})`),
      comments.length ? h("ul", {}, comments.map((c) => h("li", { class: "comment" },
        h("span", { class: "dim" }, `${when(c.created_at)} ${c.author}: `), c.text)))
        : h("p", { class: "dim" }, "None yet."),
      text, h("div", { class: "toolbar" }, add));
  }

  // --- correcting from the tree -------------------------------------------------------

  function correctForm(d) {
    const mode = h("select", { id: "correct-mode" }, h("option", { value: "revert" }, "revert: supersede this subtree"),
      h("option", { value: "append" }, "append: spawn a child plan under it"));
    const guidance = h("textarea", { id: "correct-guidance", maxlength: 10000, placeholder: "Guidance: what to do instead (a revert may leave it empty; an append needs it)" });
    const chosen = h("input", { type: "text", id: "correct-chosen", placeholder: "Replacement's chosen option (revert, optional)", size: 40 });
    const out = h("div", { id: "correct-out" });
    const dry = h("button", { id: "dry-run", onclick: () => dryRun() }, "Dry run");
    const go = h("button", { id: "confirm", class: "primary", disabled: true, onclick: () => request() }, "Apply correction…");
    const body = () => ({ mode: mode.value, guidance: guidance.value.trim() ? guidance.value : null,
      chosen_option: chosen.value.trim() ? chosen.value : null });
    mode.addEventListener("change", () => { chosen.hidden = mode.value !== "revert"; clearReport(); go.disabled = true; });

    async function dryRun() {
      dry.disabled = true;
      try {
        const report = await post(`/api/decisions/${d.decision_id}/dry-run`, body());
        await showReport(report, out);
        go.disabled = false;
      } catch (e) { toast(e.message, true); put(out, h("p", { class: "bad" }, e.message)); }
      finally { dry.disabled = false; }
    }

    async function request() {
      const b = body();
      if (b.mode === "append" && !b.guidance) { toast("An append needs guidance: it becomes the child plan's prompt.", true); return; }
      // The confirmation repeats what the dry run said, so nobody applies blind.
      const r = state.lastReport;
      const said = r ? `\nRisk: ${r.impact.risk_level}\nAffected decisions: ${r.impact.affected_count}${r.impact.exceeds_limit ? "+" : ""}` +
        `\nChild plans: ${r.impact.affected_child_plan_count}\nFiles: ${r.impact.affected_files_count}` +
        `\nEstimated recompute: ${secs(r.estimated_recompute_time_seconds)}` +
        (r.warnings.length ? `\n\n${r.warnings.join("\n")}` : "") : "";
      if (!window.confirm(`${b.mode} decision ${d.decision_id}?${said}\n\nThis changes the plan.`)) return;
      go.disabled = true;
      try {
        const r = await post(`/api/decisions/${d.decision_id}/corrections`, b);
        follow(r.correction_id, out, d.decision_id);
      } catch (e) { toast(e.message, true); go.disabled = false; }
    }

    return h("section", { class: "correct" }, h("h2", {}, "Correct this decision"),
      h("div", { class: "toolbar" }, mode, chosen), guidance, h("div", { class: "toolbar" }, dry, go), out);
  }

  function clearReport() {
    state.report = null;
    treeRoot.querySelectorAll(".affected, .target").forEach((el) => el.classList.remove("affected", "target"));
  }

  function markReport(id) {
    const s = state.nodes.get(id); const r = state.report;
    if (!s || !r) return;
    if (id === r.target) s.view.classList.add("target");
    else if (r.affected.has(id)) s.view.classList.add("affected");
    s.view.querySelectorAll(".childplan").forEach((el) => el.classList.toggle("affected", r.plans.has(el.dataset.plan)));
  }

  // The report lists the first 100 affected decisions; past those, the server says which
  // of the nodes drawn are affected (asked for each level drawn while a report shows).
  async function askAffected(ids) {
    const r = state.report;
    if (!r || r.whole || !ids.length) return;
    for (let i = 0; i < ids.length; i += AFFECTED_ASK) {
      let found;
      try { found = await post(`/api/decisions/${r.target}/affected`, { ids: ids.slice(i, i + AFFECTED_ASK) }); }
      catch (e) { toast(e.message, true); return; }
      if (state.report !== r) return;  // another dry run, or none, meanwhile
      for (const id of found.affected) { r.affected.add(id); markReport(id); }
    }
  }

  async function showReport(report, out) {
    clearReport();
    state.lastReport = report;
    const impact = report.impact;
    const listed = new Set(impact.affected_decision_ids);
    state.report = { target: impact.target_decision_id, affected: new Set(listed), listed,
      whole: !impact.lists_truncated && !impact.exceeds_limit,
      plans: new Set(impact.affected_child_plan_ids) };
    // Open the affected part of the tree: the listed decisions (the first 100 in walk
    // order), so a 10,000-decision revert opens its top levels, not the whole plan.
    for (let round = 0; round < 100; round++) {
      const closed = [...state.nodes.values()].filter((s) => !s.expanded && s.data.child_count &&
        (state.report.listed.has(s.data.decision_id) || s.data.decision_id === state.report.target));
      if (!closed.length) break;
      for (const s of closed) await expand(s.data.decision_id);
    }
    await askAffected([...state.nodes.keys()]);
    for (const id of state.nodes.keys()) markReport(id);
    const more = impact.exceeds_limit ? "+" : "";
    put(out, h("div", { class: "report", id: "report" },
      h("strong", {}, `Dry run: ${report.mode} of ${impact.target_decision_id} `), h("span", { class: "dim" }, "(nothing was changed)"),
      kv([["risk", h("strong", { class: `risk-${impact.risk_level}`, id: "report-risk" }, impact.risk_level)],
        ["affected decisions", h("span", { id: "report-affected" }, `${impact.affected_count}${more}`)],
        ["child plans", `${impact.affected_child_plan_count}${more}`],
        ["files", impact.affected_files.length ? impact.affected_files.join("\n") + (impact.affected_files_count > impact.affected_files.length ? `\n… ${impact.affected_files_count - impact.affected_files.length} more` : "") : null],
        ["estimate", `${secs(report.estimated_recompute_time_seconds)} to recompute`]]),
      report.warnings.length ? h("ul", { class: "warn" }, report.warnings.map((w) => h("li", {}, w))) : null));
    // The report opens at the bottom of the decision panel: bring it into view.
    const shown = document.getElementById("report");
    if (shown) shown.scrollIntoView({ block: "nearest" });
  }

  // Follow a correction to its end; the panel offers what the lifecycle allows.
  function follow(correctionId, out, decisionId) {
    const steps = h("div", { class: "lifecycle", id: "lifecycle" }, badge("pending"));
    const buttons = h("div", { class: "toolbar", id: "correction-actions" });
    put(out, h("p", {}, "Correction ", link(`#/correction/${correctionId}`, correctionId), " requested."), steps, buttons);
    state.following = { id: correctionId, steps, buttons, out, decision: decisionId };
    actionButtons(correctionId, "pending", buttons);
    // Events published before the stream saw them are read back from the record.
    get(`/api/corrections/${correctionId}`).then((c) => {
      for (const t of c.correction.history) if (t.to_status !== "pending") followed({ correction_id: correctionId, to_status: t.to_status, reason: t.reason || t.error, new_decision_id: c.correction.new_decision_id });
    }).catch(() => {});
  }

  function followed(e) {
    const f = state.following;
    if (!f || [...f.steps.children].some((b) => b.dataset.status === e.to_status && e.to_status !== "pending")) return;
    // The request's own PENDING event repeats the badge drawn at the request; a retry's
    // PENDING (after FAILED) is a new step.
    if (e.to_status === "pending" && f.steps.lastElementChild?.dataset.status === "pending") return;
    append(f.steps, badge(e.to_status));
    actionButtons(f.id, e.to_status, f.buttons);
    if (e.to_status === "applied") {
      clearReport();
      append(f.out, h("p", { id: "applied" }, "APPLIED. ", e.new_decision_id ? link(`#/plan/${planId}/${e.new_decision_id}`, "open the new decision") : ""));
    } else if (TERMINAL.has(e.to_status)) {
      append(f.out, h("p", { class: "bad" }, e.to_status.toUpperCase(), e.reason || e.error ? `: ${e.reason || e.error}` : ""));
    }
  }

  function actionButtons(correctionId, status, box) {
    clear(box);
    const act = async (verb, reason) => {
      try { const r = await post(`/api/corrections/${correctionId}/${verb}`, reason ? { reason } : {}); toast(`${verb}: ${r.status || "sent"}`); }
      catch (e) { toast(e.message, true); }
    };
    if (status === "pending" || status === "analyzing") append(box, h("button", { onclick: () => {
      const why = window.prompt(`Cancel correction ${correctionId}? Why (kept in its history; optional):`);
      if (why !== null) act("cancel", why.trim());
    } }, "Cancel"));
    if (status === "analyzing" || status === "executing") append(box, h("button", { class: "danger", onclick: () => { const r = window.prompt("Why end it as failed?"); if (r) act("fail", r); } }, "Fail"));
    if (status === "failed") append(box, h("button", { onclick: () => act("retry") }, "Retry"));
  }

  await held();
  await reload();
  if (selected) await select(selected);
  return { select };
}
