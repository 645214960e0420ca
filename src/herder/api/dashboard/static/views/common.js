// What several views share: whether a run is active, and a run's actions.

import { api } from "../api.js";
import { action, h, pager, fill, when } from "../dom.js";
import { ACTIVE_RUN_STATES } from "../states.js";

const ACTIVE = new Set(ACTIVE_RUN_STATES);

export function isActive(state) {
  return ACTIVE.has(state);
}

// A run's or workflow run's deadline, and whether the reaper found it unfinished past it.
export function deadline(item) {
  if (!item.deadline_at) return "";
  return [when(item.deadline_at), item.deadline_missed_at ? h("strong", {}, " · missed") : ""];
}

export function runPath(id) {
  return `#/runs/${encodeURIComponent(id)}`;
}

// Cancel while it is active (after a confirmation), re-run once it has ended: for a key
// that may (an operator's or more; a viewer's sees none).
export function runActions(run, ctx) {
  if (!ctx.may("operator")) return "";
  const base = `/v1/runs/${encodeURIComponent(run.id)}`;
  if (isActive(run.state)) {
    if (run.cancel_requested) return "cancelling…";
    return action("Cancel", () => api(`${base}/cancel`, { method: "POST" }), {
      ctx,
      danger: true,
      confirmText: `Cancel run ${run.id} (${run.job_name})?`,
    });
  }
  return action(
    "Re-run",
    async () => {
      const rerun = await api(`${base}/rerun`, { method: "POST" });
      ctx.go(runPath(rerun.id));
    },
    { ctx },
  );
}

// Suspend while it waits or runs (a running one is stopped by its worker, its checkpoint
// saved), resume once suspended; beside the run page's Cancel.
export function suspendActions(run, ctx) {
  if (!ctx.may("operator")) return "";
  const base = `/v1/runs/${encodeURIComponent(run.id)}`;
  if (run.state === "suspended") {
    return action("Resume", () => api(`${base}/resume`, { method: "POST" }), { ctx });
  }
  if (!isActive(run.state) || run.cancel_requested) return "";
  if (run.suspend_requested) return "suspending…";
  return action("Suspend", () => api(`${base}/suspend`, { method: "POST" }), {
    ctx,
    confirmText: `Suspend run ${run.id} (${run.job_name})?`,
  });
}

// A list the server pages by cursor: ``load(cursor)`` reads a page, ``show(page)`` draws it;
// "Older" and "Newer" walk the cursors, and every refresh reloads the page shown.
export function pagedList(ctx, load, show) {
  const node = h("div", { class: "list" });
  let cursors = [];
  let shown = null; // what the page last drew: redrawn only when it changes, so a selection holds
  async function refresh() {
    const page = await load(cursors.at(-1) || "");
    const drawn = JSON.stringify([cursors, page]);
    if (drawn === shown) return;
    shown = drawn;
    fill(node,
      show(page),
      pager(page, cursors, (next) => {
        cursors = next;
        ctx.refresh();
      }),
    );
  }
  return { node, refresh };
}
