// The fleet (system admins only): each worker's state, slots, resources and labels, with
// drain and undrain.

import { ApiError, api } from "../api.js";
import { action, ago, badge, h, labels, resources, row, table, when, fill } from "../dom.js";

export function mount(root, _route, ctx) {
  const list = h("div", { class: "list" });
  root.append(h("h1", {}, "Workers"), list);
  return {
    async refresh() {
      let workers;
      let stats = null;
      try {
        [workers, stats] = await Promise.all([
          api("/v1/workers", { signal: ctx.signal }),
          api("/v1/stats?minutes=1", { signal: ctx.signal }).catch(() => null),
        ]);
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
            worker.max_slots,
            resources(worker.capacity),
            labels(worker.labels),
            [when(worker.last_heartbeat_at), " · ", ago(worker.last_heartbeat_at)],
            worker.version,
            worker.state === "alive"
              ? action("Drain", () => api(path(worker, "drain"), { method: "POST" }), { ctx, confirmText: `Drain ${worker.name}? Nothing new is placed on it.` })
              : worker.state === "draining"
                ? action("Undrain", () => api(path(worker, "undrain"), { method: "POST" }), { ctx })
                : "",
          ],
          { "data-worker": worker.id },
        ),
      );
      const used = stats && stats.resources ? stats.resources : null;
      fill(list,
        used
          ? h("p", { class: "muted" }, `In use across the fleet: ${resources(used.used)}${used.used.slots !== undefined ? ` · ${used.used.slots} slots` : ""}${used.capacity ? ` of ${resources(used.capacity)}${used.capacity.slots !== undefined ? ` · ${used.capacity.slots} slots` : ""}` : ""}.`)
          : "",
        table(["Name", "Id", "State", "Slots", "Capacity", "Labels", "Last heartbeat", "Version", ""], rows, "No workers registered."),
      );
    },
  };
}
