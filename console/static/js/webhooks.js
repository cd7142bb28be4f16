// Webhooks: HTTP endpoints subscribed to event types, their deliveries, adding one (its
// secret shown this once) and removing one; the same calls as `agents webhook`.
import { get, post } from "./api.js";
import { append, clear, clip, h, toast, when } from "./dom.js";

export async function webhooksPage(main) {
  const hooks = h("tbody");
  const sent = h("tbody");
  const secretBox = h("div", { id: "webhook-secret" });
  const form = h("form", { id: "webhook-add", class: "card" },
    h("input", { name: "url", placeholder: "https://hooks.example.com/ledger", size: 40, "aria-label": "URL", required: true }),
    h("input", { name: "events", placeholder: "correction.applied, invariant.*", size: 30, "aria-label": "event types", required: true }),
    h("input", { name: "description", placeholder: "what it is for", size: 20, "aria-label": "description" }),
    h("button", { class: "primary" }, "Add webhook"));
  append(main, h("h1", {}, "Webhooks"), form, secretBox,
    h("table", { id: "webhooks" }, h("thead", {}, h("tr", {}, ["id", "url", "events", "added", "by", ""].map((t) => h("th", {}, t)))), hooks),
    h("h2", {}, "Deliveries"),
    h("table", { id: "deliveries" }, h("thead", {}, h("tr", {}, ["event", "type", "status", "tries", "last answer", "next / ended"].map((t) => h("th", {}, t)))), sent));

  async function load() {
    const [{ webhooks, sealed }, { deliveries }] = await Promise.all([get("/api/webhooks"), get("/api/webhooks/deliveries?limit=50")]);
    clear(hooks);
    if (!webhooks.length) append(hooks, h("tr", {}, h("td", { colspan: 6, class: "dim" }, "No webhooks.")));
    for (const w of webhooks) {
      append(hooks, h("tr", {}, h("td", { class: "id mono" }, w.webhook_id), h("td", { class: "mono" }, clip(w.url, 60)),
        h("td", {}, w.events.join(", ")), h("td", { class: "dim" }, when(w.created_at)), h("td", {}, w.created_by),
        h("td", {}, h("button", { onclick: () => remove(w.webhook_id) }, "remove"))));
    }
    form.title = sealed ? "secrets are sealed at rest" : "secrets are stored in MongoDB as they are (no WEBHOOK_SECRET_KEY)";
    clear(sent);
    if (!deliveries.length) append(sent, h("tr", {}, h("td", { colspan: 6, class: "dim" }, "No deliveries.")));
    for (const d of deliveries) {
      const last = d.attempts.length ? d.attempts[d.attempts.length - 1] : null;
      const answer = last ? (last.status_code ? String(last.status_code) : clip(last.error || "?", 50)) : "-";
      append(sent, h("tr", {}, h("td", { class: "mono" }, clip(d.event_id, 40)),
        h("td", {}, d.event_type.replace("io.decision-ledger.", "")),
        h("td", { class: d.status === "dead_lettered" ? "bad" : "" }, d.status), h("td", {}, String(d.attempts.length)),
        h("td", {}, answer), h("td", { class: "dim" }, when(d.status === "pending" ? d.next_at : d.ended_at))));
    }
  }

  async function remove(id) {
    try { await post(`/api/webhooks/${id}/remove`); toast(`webhook ${id} removed`); } catch (e) { toast(e.message, true); }
    await load();
  }

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const data = new FormData(form);
    try {
      const w = await post("/api/webhooks", { url: data.get("url"), events: data.get("events"), description: data.get("description") || null });
      // Shown this once: nothing shows it again.
      clear(secretBox);
      append(secretBox, h("div", { class: "card" }, h("strong", {}, `Webhook ${w.webhook_id} added. Its signing secret, shown this once:`),
        h("pre", { class: "mono" }, w.secret)));
      form.reset();
    } catch (err) { toast(err.message, true); }
    await load();
  });
  await load();
  return {};
}
