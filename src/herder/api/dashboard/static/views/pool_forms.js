// A system admin's pool forms (docs/pools.md): a new pool, and a pool's edit (PATCH: each
// field given replaces the stored one, its shares as a whole). A share is a line
// "TENANT cpu=4 memory_mb=8192 gpus=1", the tenant by its name or id; autoscaling's worker
// shape and bounds, left empty, make a fixed fleet.

import { ApiError, api, query } from "../api.js";
import { byLine, editForm, optional, pairLines, pairs, section } from "../editor.js";

const TENANT_PAGES = 20; // of 500: the tenants a share's name is looked up among

function poolFields(pool, names) {
  const shares = (pool?.shares || []).map((one) =>
    [names ? names.of("tenants", one.tenant_id) : one.tenant_id, `cpu=${one.cpu}`, `memory_mb=${one.memory_mb}`, `gpus=${one.gpus}`].join(" "));
  const scaling = pool?.autoscaling;
  const fields = [
    { name: "description", label: "Description", initial: pool?.description },
    { name: "selector", label: "Selector (label=value lines)", kind: "textarea", rows: 2, initial: pool ? pairLines(pool.selector) : "",
      hint: "empty: pool=NAME, what herder worker --pool NAME registers with" },
    { name: "shares", label: "Shares (a line a tenant)", kind: "textarea", rows: 3, initial: shares.join("\n"),
      placeholder: "acme cpu=4 memory_mb=8192 gpus=0", hint: "a tenant by name or id; no amount: it borrows only" },
    { name: "worker_cpu", label: "Autoscaling: worker cpu", kind: "number", initial: scaling?.worker.cpu, paths: ["autoscaling.worker.cpu", "autoscaling.worker"] },
    { name: "worker_memory_mb", label: "Autoscaling: worker memory (MB)", kind: "number", initial: scaling?.worker.memory_mb, paths: ["autoscaling.worker.memory_mb"] },
    { name: "min_workers", label: "Autoscaling: min workers", kind: "number", initial: scaling?.min_workers, paths: ["autoscaling.min_workers"] },
    { name: "max_workers", label: "Autoscaling: max workers", kind: "number", initial: scaling?.max_workers, paths: ["autoscaling.max_workers", "autoscaling"] },
  ];
  return pool ? fields : [{ name: "name", label: "Name", required: true }, ...fields];
}

// Every tenant's id by its name (a system admin's list), read once per save that needs it.
async function tenantIds() {
  const byName = new Map();
  let cursor = "";
  for (let page = 0; page < TENANT_PAGES; page += 1) {
    const found = await api(`/v1/tenants${query({ limit: 500, cursor })}`);
    for (const tenant of found.items) byName.set(tenant.name, tenant.id);
    if (!found.next_cursor) break;
    cursor = found.next_cursor;
  }
  return byName;
}

async function sharesOf(text) {
  const lines = text.split("\n").map((line) => line.trim()).filter(Boolean);
  if (!lines.length) return [];
  const byName = lines.some((line) => !line.startsWith("ten_")) ? await tenantIds() : new Map();
  return lines.map((line, index) => {
    const [tenant, ...amounts] = line.split(/\s+/);
    const id = tenant.startsWith("ten_") ? tenant : byName.get(tenant);
    if (!id) throw new ApiError(422, `line ${index + 1}: no tenant named ${tenant}`, "shares");
    try {
      return { tenant_id: id, ...pairs(amounts.join("\n"), "shares") };
    } catch {
      throw new ApiError(422, `line ${index + 1}: write TENANT cpu=4 memory_mb=8192 gpus=1`, "shares");
    }
  });
}

// The pool's autoscaling as the fields say (the rest of a policy kept as it was); null: off.
function autoscalingOf(values, current) {
  const given = ["worker_cpu", "worker_memory_mb", "min_workers", "max_workers"].some((name) => values[name] !== null);
  if (!given) return null;
  return {
    ...(current || {}),
    worker: { ...(current?.worker || {}), cpu: optional(values.worker_cpu), memory_mb: optional(values.worker_memory_mb) },
    min_workers: optional(values.min_workers),
    max_workers: optional(values.max_workers),
  };
}

async function specOf(values, current) {
  const selector = pairs(values.selector, "selector");
  return {
    description: values.description,
    selector: Object.keys(selector).length ? selector : null,
    shares: await sharesOf(values.shares),
    autoscaling: autoscalingOf(values, current?.autoscaling),
  };
}

export function createPoolSection(ctx) {
  const form = editForm({
    label: "New pool",
    fields: poolFields(null, null),
    ctx,
    idPrefix: "new-pool",
    submitText: "Create pool",
    save: async (values) => {
      try {
        const made = await api("/v1/pools", { method: "POST", body: { name: values.name, ...(await specOf(values, null)) } });
        ctx.refresh();
        return `Created pool ${made.name}.`;
      } catch (error) {
        throw byLine(error, "shares");
      }
    },
  });
  return section("New pool", form.node);
}

export function editPoolForm(pool, names, ctx) {
  const form = editForm({
    label: `Edit pool ${pool.name}`,
    fields: poolFields(pool, names),
    ctx,
    idPrefix: "edit-pool",
    save: async (values) => {
      try {
        const saved = await api(`/v1/pools/${encodeURIComponent(pool.id)}`, { method: "PATCH", body: await specOf(values, pool) });
        ctx.refresh();
        return `Saved pool ${saved.name}.`;
      } catch (error) {
        throw byLine(error, "shares");
      }
    },
  });
  return section(`Edit pool ${pool.name}`, form.node);
}
