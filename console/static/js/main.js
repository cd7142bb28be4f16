// Hash routes: #/plans, #/plan/<id>[/<decision>], #/corrections, #/correction/<id>,
// #/dead-letters, #/dead-letter/<id>, #/invariants[/<plan>], #/approvals, #/search, #/bulk.
import { get, stopLive } from "./api.js";
import { append, h, toast } from "./dom.js";
import { plansPage } from "./plans.js";
import { planPage } from "./tree.js";
import { correctionPage, correctionsPage } from "./corrections.js";
import { deadLetterPage, deadLettersPage } from "./deadletters.js";
import { invariantsPage } from "./invariants.js";
import { asOfPage } from "./asof.js";
import { webhooksPage } from "./webhooks.js";
import { approvalsPage } from "./approvals.js";
import { searchPage } from "./search.js";
import { bulkPage } from "./bulk.js";

const root = document.getElementById("main");

const planRoute = (m, main) => planPage(main, m[1].toUpperCase(), m[2] && m[2].toUpperCase());

const routes = [
  [/^#\/plans$/, (m, main) => plansPage(main), "plans"],
  [/^#\/plan\/([0-9A-Za-z]{26})\/as-of\/([^/]+)(\/before)?$/, (m, main) => asOfPage(main, m[1].toUpperCase(), decodeURIComponent(m[2]), Boolean(m[3])), "plans"],
  [/^#\/plan\/([0-9A-Za-z]{26})(?:\/([0-9A-Za-z]{26}))?$/, planRoute, "plans"],
  [/^#\/corrections$/, (m, main) => correctionsPage(main), "corrections"],
  [/^#\/correction\/([0-9A-Za-z]{26})$/, (m, main) => correctionPage(main, m[1].toUpperCase()), "corrections"],
  [/^#\/dead-letters$/, (m, main) => deadLettersPage(main), "dead-letters"],
  [/^#\/dead-letter\/(.+)$/, (m, main) => deadLetterPage(main, decodeURIComponent(m[1])), "dead-letters"],
  [/^#\/invariants(?:\/([0-9A-Za-z]{26}))?$/, (m, main) => invariantsPage(main, m[1] && m[1].toUpperCase()), "invariants"],
  [/^#\/webhooks$/, (m, main) => webhooksPage(main), "webhooks"],
  [/^#\/approvals$/, (m, main) => approvalsPage(main), "approvals"],
  [/^#\/bulk$/, (m, main) => bulkPage(main), "bulk"],
  [/^#\/search(?:\/(.*))?$/, (m, main) => searchPage(main, m[1] ? decodeURIComponent(m[1]) : ""), "search"],
];

let current = null;

async function route() {
  const hash = window.location.hash || "#/plans";
  for (const [i, [pattern, page, nav]] of routes.entries()) {
    const m = hash.match(pattern);
    if (!m) continue;
    // A plan's page stays while the operator picks decisions in it; any other move
    // renders a new page.
    const key = `${i}:` + (page === planRoute ? hash.split("/").slice(0, 3).join("/") : hash);
    document.querySelectorAll("[data-nav]").forEach((a) => a.classList.toggle("active", a.dataset.nav === nav));
    // Moving within one plan's page (picking another decision) keeps the tree and stream.
    if (current && current.key === key && current.select) { current.select(m[2] && m[2].toUpperCase()); return; }
    stopLive();
    // Each page renders into a box of its own: a page still loading when the operator
    // moves on writes into a box no longer shown, never into the next page.
    const main = h("div", { class: "page" });
    root.replaceChildren(main);
    current = { key };
    try { const done = await page(m, main); if (main.isConnected) current = { key, ...(done || {}) }; } catch (e) {
      append(main, h("p", { class: "bad" }, e.message));
    }
    return;
  }
  window.location.hash = "#/plans";
}

document.getElementById("find").addEventListener("submit", async (e) => {
  e.preventDefault();
  const id = new FormData(e.target).get("id").trim();
  if (!id) return;
  try {
    const found = await get(`/api/find?id=${encodeURIComponent(id)}`);
    if (found.kind === "decision") window.location.hash = `#/plan/${found.plan_id}/${found.decision_id}`;
    else if (found.kind === "plan") window.location.hash = `#/plan/${found.plan_id}`;
    else window.location.hash = `#/correction/${found.correction_id}`;
  } catch (err) { toast(err.message, true); }
});

document.getElementById("search").addEventListener("submit", (e) => {
  e.preventDefault();
  const words = new FormData(e.target).get("q").trim();
  window.location.hash = `#/search/${encodeURIComponent(words)}`;
});

window.addEventListener("hashchange", route);
route();
