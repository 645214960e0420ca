// A system admin's form for a tenant's time budgets (docs/budgets.md; PUT
// /v1/tenants/<id>/budgets replaces them whole, with the zone their periods begin in). A
// budget is a line "day cpu_seconds=3600 gpu_seconds=600 pool=a100 hard"; a tenant's own
// keys see their budgets in the Usage page's table, read-only.

import { ApiError, api, query } from "../api.js";
import { h } from "../dom.js";
import { byLine, editForm, section } from "../editor.js";

const PERIODS = ["day", "week", "month"];

function budgetLine(budget) {
  return [
    budget.period,
    budget.cpu_seconds !== null && budget.cpu_seconds !== undefined ? `cpu_seconds=${budget.cpu_seconds}` : "",
    budget.gpu_seconds !== null && budget.gpu_seconds !== undefined ? `gpu_seconds=${budget.gpu_seconds}` : "",
    budget.pool ? `pool=${budget.pool}` : "",
    budget.hard ? "hard" : "",
  ].filter(Boolean).join(" ");
}

function budgetOf(line, index) {
  const [period, ...words] = line.split(/\s+/);
  if (!PERIODS.includes(period)) throw new ApiError(422, `line ${index + 1}: begin with day, week or month`, "budgets");
  const budget = { period };
  for (const word of words) {
    const at = word.indexOf("=");
    if (word === "hard") budget.hard = true;
    else if (at > 0) budget[word.slice(0, at)] = word.slice(at + 1);
    else throw new ApiError(422, `line ${index + 1}: ${word} is neither name=value nor hard`, "budgets");
  }
  return budget;
}

function budgetsOf(text) {
  return text.split("\n").map((line) => line.trim()).filter(Boolean).map(budgetOf);
}

// The form, once the tenants are read; choosing a tenant fills in its budgets.
export async function budgetSection(ctx) {
  const tenants = await api(`/v1/tenants${query({ limit: 500 })}`, { signal: ctx.signal });
  const choices = tenants.items.map((tenant) => [tenant.id, tenant.name]);
  const form = editForm({
    label: "Set budgets",
    fields: [
      { name: "tenant", label: "Tenant", kind: "select", choices: [["", "choose a tenant"], ...choices] },
      { name: "time_zone", label: "Time zone", initial: "UTC", hint: "IANA name: where each period begins" },
      { name: "budgets", label: "Budgets (a line each)", kind: "textarea", rows: 3,
        placeholder: "day cpu_seconds=3600 gpu_seconds=600 pool=a100 hard", hint: "period, then cpu_seconds=, gpu_seconds=, pool=, hard" },
    ],
    ctx,
    idPrefix: "budgets",
    submitText: "Set budgets",
    save: async (values) => {
      if (!values.tenant) throw new ApiError(422, "choose a tenant", "tenant");
      try {
        const body = { time_zone: values.time_zone, budgets: budgetsOf(values.budgets) };
        const saved = await api(`/v1/tenants/${encodeURIComponent(values.tenant)}/budgets`, { method: "PUT", body });
        ctx.refresh();
        return `Set ${saved.budgets.length} budget${saved.budgets.length === 1 ? "" : "s"} (${saved.time_zone}).`;
      } catch (error) {
        throw byLine(error, "budgets");
      }
    },
  });
  // Read-only while the chosen tenant's budgets load, so nothing typed meanwhile is replaced.
  const loaded = [form.input("time_zone"), form.input("budgets")];
  form.input("tenant").addEventListener("change", async (event) => {
    form.clear();
    if (!event.target.value) return;
    for (const node of loaded) node.readOnly = true;
    try {
      const current = await api(`/v1/tenants/${encodeURIComponent(event.target.value)}/budgets`, { signal: ctx.signal });
      form.input("time_zone").value = current.time_zone;
      form.input("budgets").value = current.budgets.map(budgetLine).join("\n");
    } catch (error) {
      form.show(error);
    } finally {
      for (const node of loaded) node.readOnly = false;
    }
  });
  return section("Set a tenant's budgets", h("p", { class: "muted" }, "They replace the tenant's budgets whole; a spent budget holds its new runs, a hard one stops its running ones."), form.node);
}
