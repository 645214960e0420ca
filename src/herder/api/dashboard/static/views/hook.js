// One hook (docs/events.md#inbound-webhooks): its address and its last deliveries; for a
// developer or admin, its edit (sent with the ETag it was read with: a stale edit says so), a
// new signing secret (shown once) and its delete.

import { api, query } from "../api.js";
import { action, badge, facts, fill, h, row, table, when } from "../dom.js";
import { deleteAction, editForm, readForEdit, section, sendEdit } from "../editor.js";
import { hookFields, hookSpec, inboundUrl, secretOnce } from "./hooks.js";

const DELIVERIES = 20;

async function editSection(id, reveal, ctx) {
  let { data: hook, etag } = await readForEdit(`/v1/hooks/${encodeURIComponent(id)}`, ctx.signal);
  const path = `/v1/hooks/${encodeURIComponent(hook.id)}`;
  const form = editForm({
    label: "Edit hook",
    fields: hookFields(hook),
    ctx,
    idPrefix: "edit-hook",
    save: async (values) => {
      const { data: saved, etag: next } = await sendEdit(path, "PATCH", hookSpec(values), etag);
      etag = next;
      ctx.refresh();
      return `Saved hook ${saved.name} (version ${saved.version}).`;
    },
  });
  const rotate = action("New secret", async () => {
    const rotated = await api(`${path}/secret`, { method: "POST" });
    fill(reveal, secretOnce(rotated));
    return "A new signing secret: deliveries signed with the old one are refused from now on.";
  }, { ctx, confirmText: `Give hook ${hook.name} a new signing secret? Deliveries signed with the old one are refused from then on.` });
  return section("Edit", form.node, h("p", {}, rotate, " ", deleteAction(`hook ${hook.name}`, path, ctx, () => ctx.go("#/hooks"))));
}

export function mount(root, route, ctx) {
  const title = h("h1", {}, "Hook");
  const about = h("div");
  const reveal = h("div");
  const deliveries = h("div", { class: "list" });
  const editing = h("div");
  root.append(title, about, reveal, editing, h("h2", {}, "Last deliveries"), deliveries);
  if (ctx.may("developer")) editSection(route.id, reveal, ctx).then((node) => fill(editing, node), (error) => ctx.fail(error));
  return {
    async refresh() {
      const hook = await api(`/v1/hooks/${encodeURIComponent(route.id)}`, { signal: ctx.signal });
      const page = await api(`/v1/hooks/${encodeURIComponent(hook.id)}/deliveries${query({ limit: DELIVERIES })}`, { signal: ctx.signal });
      title.textContent = `Hook ${hook.name}`;
      fill(about, facts([
        ["Address", h("code", { class: "hook-url" }, inboundUrl(hook))],
        ["Scheme", hook.scheme],
        ["Event", h("code", {}, hook.event)],
        ["Rate", `${hook.rate_per_second}/s, burst ${hook.burst}`],
        ["Enabled", hook.enabled ? "yes" : "no"],
        ["Version", hook.version],
      ]));
      fill(deliveries, table(["Received", "Status", "HTTP", "Delivery id", "Why"],
        page.items.map((one) => row([when(one.received_at), badge(one.status), one.http_status, one.delivery_id || "", one.reason || ""], { "data-delivery": one.id })),
        "No delivery yet."));
    },
  };
}
