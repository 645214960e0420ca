// One limit (docs/flow-control.md): what it allows, its busiest keys, and the runs waiting on
// it in dispatch order, each with why.

import { api, query } from "../api.js";
import { duration, fill, h, link, row, table } from "../dom.js";
import { runPath } from "./common.js";
import { allows } from "./limits.js";

const KEYS = 50;
const WAITING = 50;

export function mount(root, route, ctx) {
  const id = route.id; // the limit's id or name
  const title = h("h1", {}, "Limit");
  const summary = h("p", { class: "muted" });
  const keys = h("div", { class: "list" });
  const waiting = h("div", { class: "list" });
  root.append(title, summary, h("h2", {}, "Busiest keys"), keys, h("h2", {}, "Waiting runs"), waiting);
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

