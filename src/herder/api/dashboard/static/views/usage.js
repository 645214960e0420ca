// Usage: CPU- and GPU-seconds used this day, week or month, by tenant, pool or job, and each
// time budget against its period (docs/budgets.md). A tenant sees its own, read-only; a
// system admin sets any tenant's here (budget_forms.js).

import { api, query } from "../api.js";
import { fill, h, row, table, when } from "../dom.js";
import { nameBook } from "../names.js";
import { isSystemAdmin } from "../role.js";
import { budgetSection } from "./budget_forms.js";

const PERIODS = ["day", "week", "month"];
const GROUPS = ["tenant", "pool", "job"];

const seconds = (value) => value.toFixed(1);
const limitOf = (used, limit) => (limit === null || limit === undefined ? "–" : `${used.toFixed(0)} / ${limit}`);

function choices(name, values, current, route) {
  return h(
    "p",
    { class: "muted" },
    `${name}: `,
    values.map((value) =>
      value === current
        ? h("strong", {}, `${value} `)
        : h("a", { href: `#/usage${query({ ...route, [name]: value })}` }, `${value} `),
    ),
  );
}

export function mount(root, route, ctx) {
  const period = PERIODS.includes(route.params.get("period")) ? route.params.get("period") : "day";
  const groupBy = GROUPS.includes(route.params.get("group_by")) ? route.params.get("group_by") : "tenant";
  const body = h("div", { class: "list" });
  const names = nameBook(ctx.signal);
  const tenant = (id) => h("span", { title: id }, names.of("tenants", id));
  root.append(
    h("h1", {}, "Usage"),
    choices("period", PERIODS, period, { period, group_by: groupBy }),
    choices("group_by", GROUPS, groupBy, { period, group_by: groupBy }),
    body,
  );
  if (isSystemAdmin()) {
    const setting = h("div");
    root.append(setting);
    budgetSection(ctx).then((node) => fill(setting, node), (error) => ctx.fail(error));
  } else {
    root.append(h("p", { class: "muted" }, "Budgets are set by a system admin."));
  }
  return {
    async refresh() {
      const report = await api(`/v1/usage${query({ period, group_by: groupBy })}`, { signal: ctx.signal });
      await Promise.all([
        names.learn("tenants", [...report.rows, ...report.budgets].map((item) => item.tenant_id)),
        names.learn("jobs", report.rows.map((item) => item.job_id)),
      ]);
      const used = report.rows.map((item) =>
        row([tenant(item.tenant_id), item.pool || "–", item.job_id ? h("span", { title: item.job_id }, names.of("jobs", item.job_id)) : "–",
             seconds(item.cpu_seconds), seconds(item.gpu_seconds), when(item.period_start)]),
      );
      const budgets = report.budgets.map((standing) =>
        row(
          [
            tenant(standing.tenant_id),
            `${standing.budget.hard ? "hard " : ""}${standing.budget.period}${standing.budget.pool ? ` (pool ${standing.budget.pool})` : ""}`,
            limitOf(standing.cpu_seconds, standing.budget.cpu_seconds),
            limitOf(standing.gpu_seconds, standing.budget.gpu_seconds),
            `${Math.round(standing.fraction * 100)}%${standing.spent ? " (spent)" : ""}`,
            when(standing.resets_at),
          ],
          { "data-spent": String(standing.spent) },
        ),
      );
      fill(
        body,
        table(["Tenant", "Pool", "Job", "CPU-seconds", "GPU-seconds", "Since"], used, "Nothing used this period."),
        h("h2", {}, "Budgets"),
        table(["Tenant", "Budget", "CPU used / limit", "GPU used / limit", "Used", "Resets"], budgets, "No budgets."),
      );
    },
  };
}
