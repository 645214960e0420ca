// One limit (docs/flow-control.md): what it allows, its busiest keys, and the runs waiting on
// it in dispatch order, each with why; for a developer or admin, its edit (sent with the
// ETag it was read with: a stale edit says so) and its delete (refused while anything names it).

import { api, query } from "../api.js";
import { duration, fill, h, link, row, table } from "../dom.js";
import { deleteAction, editForm, readForEdit, section, sendEdit } from "../editor.js";
import { runPath } from "./common.js";
import { allows, limitFields, limitSpec } from "./limits.js";

const KEYS = 50;
const WAITING = 50;

async function editSection(id, ctx) {
  let { data: limit, etag } = await readForEdit(`/v1/limits/${encodeURIComponent(id)}`, ctx.signal);
  const path = `/v1/limits/${encodeURIComponent(limit.id)}`;
  const form = editForm({
    label: "Edit limit",
    fields: limitFields(limit),
    ctx,
    idPrefix: "edit-limit",
    save: async (values) => {
      const { data: saved, etag: next } = await sendEdit(path, "PATCH", limitSpec(values), etag);
      etag = next;
      ctx.refresh();
      return `Saved limit ${saved.name} (version ${saved.version}).`;
    },
  });
  return section("Edit", form.node, h("p", {}, deleteAction(`limit ${limit.name}`, path, ctx, () => ctx.go("#/limits"))));
}

export function mount(root, route, ctx) {
  const id = route.id; // the limit's id or name
  const title = h("h1", {}, "Limit");
  const summary = h("p", { class: "muted" });
  const keys = h("div", { class: "list" });
  const waiting = h("div", { class: "list" });
  const editing = h("div");
  root.append(title, summary, h("h2", {}, "Busiest keys"), keys, h("h2", {}, "Waiting runs"), waiting, editing);
  if (ctx.may("developer")) {
    editSection(id, ctx).then((node) => fill(editing, node), (error) => ctx.fail(error));
  }
  return {
    async refresh() {
      const limit = await api(`/v1/limits/${encodeURIComponent(id)}`, { signal: ctx.signal });
      const [usage, queue] = await Promise.all([
        api(`/v1/limits/${limit.id}/keys${query({ limit: KEYS })}`, { signal: ctx.signal }),
        api(`/v1/queue${query({ limit_id: limit.id, limit: WAITING })}`, { signal: ctx.signal }),
      ]);
      title.textContent = `Limit ${limit.name}`;
      summary.textContent = `${allows(limit)}; when a key is full: ${limit.strategy}.`;
      fill(
        keys,
        table(
          ["Key", "Running", "Queued", "Scheduled"],
          usage.map((one) => row([h("code", {}, one.key), one.running, one.queued, one.scheduled], { "data-key": one.key })),
          "No key has active runs.",
        ),
      );
      fill(
        waiting,
        table(
          ["Run", "Job", "Waited", "Waiting because"],
          queue.items.map((entry) =>
            row([link(runPath(entry.run_id), entry.run_id), entry.job_name, duration(entry.waited_seconds),
                 h("span", { class: "reason" }, entry.waiting_reason || "being placed")], { "data-run": entry.run_id }),
          ),
          "No run waits on this limit.",
        ),
      );
    },
  };
}
