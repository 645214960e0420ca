// The fleet (system admins only): each worker's state, slots, resources and labels, with
// drain and undrain, and forget for a lost one.

import { ApiError, api } from "../api.js";
import { action, ago, badge, fill, h, labels, row, table, when } from "../dom.js";

// "0.5 / 2 cpu · 300 / 1024 MB": what its running attempts hold of what it offers.
function held(worker) {
  const use = worker.in_use || { cpu: 0, memory_mb: 0, gpus: 0 };
  const have = worker.capacity;
  const parts = [`${use.cpu} / ${have.cpu} cpu`, `${use.memory_mb} / ${have.memory_mb} MB`];
  if (have.gpus) parts.push(`${use.gpus} / ${have.gpus} gpu`);
  return parts.join(" · ");
}

export function mount(root, _route, ctx) {
  const list = h("div", { class: "list" });
  root.append(h("h1", {}, "Workers"), list);
  return {
    async refresh() {
      let workers;
      try {
        workers = await api("/v1/workers", { signal: ctx.signal });
      } catch (error) {
        if (error instanceof ApiError && error.status === 403) {
          fill(list, h("p", { class: "empty" }, "The fleet view needs a system admin key."));
          return;
        }
        throw error;
      }
      const path = (worker, verb) => `/v1/workers/${encodeURIComponent(worker.id)}/${verb}`;
      const rows = workers.map((worker) =>
        row(
          [
            worker.name,
            h("code", {}, worker.id),
            badge(worker.state),
            `${worker.in_use ? worker.in_use.slots : "?"} / ${worker.max_slots}`,
            held(worker),
            labels(worker.labels),
            [when(worker.last_heartbeat_at), " · ", ago(worker.last_heartbeat_at)],
            worker.version,
            worker.state === "alive"
              ? action("Drain", () => api(path(worker, "drain"), { method: "POST" }), { ctx, confirmText: `Drain ${worker.name}? Nothing new is placed on it.` })
              : worker.state === "draining"
                ? action("Undrain", () => api(path(worker, "undrain"), { method: "POST" }), { ctx })
                : action("Forget", () => api(path(worker, "forget"), { method: "POST" }), { ctx, confirmText: `Forget ${worker.name}? It is no longer listed; its runs still name it.` }),
          ],
          { "data-worker": worker.id },
        ),
      );
      fill(
        list,
        table(["Name", "Id", "State", "Slots in use", "Resources in use", "Labels", "Last heartbeat", "Version", ""], rows, "No workers registered."),
      );
    },
  };
}
