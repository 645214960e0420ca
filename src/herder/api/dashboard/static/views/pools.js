// Pools (docs/pools.md): each pool's workers, the tenants that may use it with their nominal
// shares, what each runs in it now and how much of that borrows (a tenant's key sees its own
// share and use only), what it used today, and its autoscaling — how many workers it should
// have now and why (GET /v1/pools/<id>/autoscaling, system admins). A system admin makes,
// edits and deletes pools here (pool_forms.js); other keys see no form.

import { ApiError, api, query } from "../api.js";
import { fill, h, labels, row, table } from "../dom.js";
import { nameBook } from "../names.js";
import { isSystemAdmin } from "../role.js";
import { noneYet } from "./common.js";
import { deleteAction, opener } from "../editor.js";
import { createPoolSection, editPoolForm } from "./pool_forms.js";

const PAGE = 100;

// "acme: 8 cpu · 16384 MB · 2 gpu", or "acme: borrowing only" for a share of nothing.
function share(one, names) {
  const parts = [];
  if (one.cpu) parts.push(`${one.cpu} cpu`);
  if (one.memory_mb) parts.push(`${one.memory_mb} MB`);
  if (one.gpus) parts.push(`${one.gpus} gpu`);
  const tenant = names.of("tenants", one.tenant_id);
  return h("div", { class: "share", "data-tenant": tenant }, `${tenant}: ${parts.length ? parts.join(" · ") : "borrowing only"}`);
}

// "acme: 3 attempts (2 borrowed) · 3 cpu · 768 MB · 3 gpu": what a tenant runs in it now.
function inUse(use, names) {
  const tenant = names.of("tenants", use.tenant_id);
  const borrowed = use.borrowed ? ` (${use.borrowed} borrowed)` : "";
  const gpus = use.gpus ? ` · ${use.gpus} gpu` : "";
  const what = `${use.attempts} attempt${use.attempts === 1 ? "" : "s"}${borrowed} · ${use.cpu} cpu · ${use.memory_mb} MB${gpus}`;
  return h("div", { class: "use", "data-tenant": tenant }, `${tenant}: ${what}`);
}

// "4 runs (6 cpu · 12288 MB)": a demand as the autoscaling endpoint counts it.
function demand(amount) {
  const gpus = amount.gpus ? ` · ${amount.gpus} gpu` : "";
  return `${amount.runs} run${amount.runs === 1 ? "" : "s"} (${amount.cpu} cpu · ${amount.memory_mb} MB${gpus})`;
}

function autoscaling(pool, scaling) {
  const spec = pool.autoscaling;
  if (!spec) return "off (a fixed fleet)";
  const shape = `${spec.worker.cpu} cpu · ${spec.worker.memory_mb} MB`;
  const bounds = `${spec.min_workers} to ${spec.max_workers} workers of ${shape}`;
  if (!scaling) return bounds;
  return h(
    "div",
    {},
    h("div", {}, bounds),
    h("div", { class: "desired" }, `wants ${scaling.desired_workers} now: running ${demand(scaling.running)}, queued ${demand(scaling.queued)}, forecast peak ${demand(scaling.forecast_peak)}`),
  );
}

function used(rows) {
  if (!rows.length) return "–";
  const cpu = rows.reduce((sum, one) => sum + one.cpu_seconds, 0);
  const gpu = rows.reduce((sum, one) => sum + one.gpu_seconds, 0);
  return `${cpu.toFixed(0)} CPU-s${gpu ? ` · ${gpu.toFixed(0)} GPU-s` : ""}`;
}

export function mount(root, _route, ctx) {
  const names = nameBook(ctx.signal);
  const body = h("div", { class: "list" });
  const admin = isSystemAdmin();
  const editing = h("div", { class: "editing" });
  root.append(
    h("h1", {}, "Pools"),
    h("p", { class: "muted" }, "Workers set apart by their labels, with the tenants that may use each and their nominal shares; a tenant with no share left borrows what others leave idle."),
    body,
    editing,
    admin ? createPoolSection(ctx) : "",
  );
  const actions = (pool) => (admin ? [
    opener("Edit", editing, () => editPoolForm(pool, names, ctx)),
    deleteAction(`pool ${pool.name}`, `/v1/pools/${encodeURIComponent(pool.id)}`, ctx),
  ] : null);
  return {
    async refresh() {
      const [page, usage] = await Promise.all([
        api(`/v1/pools${query({ limit: PAGE })}`, { signal: ctx.signal }),
        api(`/v1/usage${query({ period: "day", group_by: "pool" })}`, { signal: ctx.signal }),
      ]);
      await names.learn("tenants", page.items.flatMap((pool) => [...pool.shares, ...pool.in_use].map((one) => one.tenant_id)));
      const scaled = await Promise.all(page.items.map((pool) => (pool.autoscaling ? scalingOf(pool, ctx) : null)));
      const rows = page.items.map((pool, index) =>
        row(
          [
            pool.name,
            pool.description || "",
            pool.workers,
            labels(pool.selector),
            pool.shares.length ? pool.shares.map((one) => share(one, names)) : "no tenant yet",
            pool.in_use.length ? pool.in_use.map((use) => inUse(use, names)) : "nothing",
            used(usage.rows.filter((one) => one.pool === pool.name)),
            autoscaling(pool, scaled[index]),
            ...(admin ? [actions(pool)] : []),
          ],
          { "data-pool": pool.name },
        ),
      );
      fill(
        body,
        table(
          ["Pool", "Description", "Workers", "Selector", "Shares", "Running now", "Used today", "Autoscaling", ...(admin ? [""] : [])],
          rows,
          noneYet("pools", "herder pool create NAME --share TENANT=cpu=8"),
        ),
      );
    },
  };
}

// What the autoscaler reads (system admins); a tenant's key is refused it and sees the policy.
async function scalingOf(pool, ctx) {
  try {
    return await api(`/v1/pools/${encodeURIComponent(pool.id)}/autoscaling`, { signal: ctx.signal });
  } catch (error) {
    if (error instanceof ApiError && (error.status === 403 || error.status === 404)) return null;
    throw error;
  }
}
