// The queue in dispatch order, each run with why it is not placed yet.

import { api, query } from "../api.js";
import { duration, h, labels, link, resources, row, table } from "../dom.js";
import { nameBook } from "../names.js";
import { pagedList, runActions, runPath } from "./common.js";

const PAGE = 50;

function queueRows(entries, names, ctx) {
  return entries.map((entry) =>
    row(
      [
        link(runPath(entry.run_id), entry.run_id),
        h("span", { title: entry.tenant_id }, names.of("tenants", entry.tenant_id)),
        entry.job_name,
        entry.priority,
        [resources(entry.resources), entry.replicas > 1 ? ` × ${entry.replicas}` : ""],
        labels(entry.requires),
        duration(entry.waited_seconds),
        h("span", { class: "reason" }, entry.waiting_reason || "being placed"),
        runActions({ id: entry.run_id, job_name: entry.job_name, state: "queued" }, ctx),
      ],
      { "data-run": entry.run_id },
    ),
  );
}

export function mount(root, _route, ctx) {
  const names = nameBook(ctx.signal);
  const list = pagedList(
    ctx,
    async (cursor) => {
      const page = await api(`/v1/queue${query({ limit: PAGE, cursor })}`, { signal: ctx.signal });
      await names.learn("tenants", page.items.map((entry) => entry.tenant_id));
      return page;
    },
    (page) => table(["Run", "Tenant", "Job", "Priority", "Needs", "Requires", "Waited", "Waiting because", ""], queueRows(page.items, names, ctx), "The queue is empty."),
  );
  root.append(h("h1", {}, "Queue"), h("p", { class: "muted" }, "Queued runs in the order the dispatcher considers them."), list.node);
  return list;
}
