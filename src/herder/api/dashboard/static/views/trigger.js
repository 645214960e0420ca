// One trigger (docs/events.md): what it does; for a developer or admin, its edit (sent with
// the ETag it was read with: a stale edit says so) and its delete.

import { api } from "../api.js";
import { facts, fill, h } from "../dom.js";
import { deleteAction, editForm, readForEdit, section, sendEdit } from "../editor.js";
import { paramsShown, starts, triggerFields, triggerSpec } from "./triggers.js";

async function editSection(id, ctx) {
  let { data: trigger, etag } = await readForEdit(`/v1/triggers/${encodeURIComponent(id)}`, ctx.signal);
  const path = `/v1/triggers/${encodeURIComponent(trigger.id)}`;
  const form = editForm({
    label: "Edit trigger",
    fields: triggerFields(trigger),
    ctx,
    idPrefix: "edit-trigger",
    save: async (values) => {
      const { data: saved, etag: next } = await sendEdit(path, "PATCH", triggerSpec(values), etag);
      etag = next;
      ctx.refresh();
      return `Saved trigger ${saved.name} (version ${saved.version}).`;
    },
  });
  return section("Edit", form.node,
    h("p", {}, deleteAction(`trigger ${trigger.name}`, path, ctx, () => ctx.go("#/triggers"))));
}

export function mount(root, route, ctx) {
  const title = h("h1", {}, "Trigger");
  const about = h("div");
  const editing = h("div");
  root.append(title, about, editing);
  if (ctx.may("developer")) editSection(route.id, ctx).then((node) => fill(editing, node), (error) => ctx.fail(error));
  return {
    async refresh() {
      const trigger = await api(`/v1/triggers/${encodeURIComponent(route.id)}`, { signal: ctx.signal });
      title.textContent = `Trigger ${trigger.name}`;
      fill(about, facts([
        ["Event", h("code", {}, trigger.event)],
        ["Filter", trigger.filter ? h("code", {}, trigger.filter) : "every such event"],
        ["Starts", starts(trigger)],
        ["Parameters", paramsShown(trigger.params)],
        ["Enabled", trigger.enabled ? "yes" : "no"],
        ["Version", trigger.version],
      ]));
    },
  };
}
