// Limits by key (docs/flow-control.md): each limit of the tenant and what it allows per key;
// a developer or admin makes one here (its edit and delete are on its own page).

import { api, query } from "../api.js";
import { fill, h, link, row, table } from "../dom.js";
import { editForm, optional, section } from "../editor.js";
import { noneYet } from "./common.js";

export const limitPath = (id) => `#/limits/${encodeURIComponent(id)}`;

const STRATEGIES = ["queue", "cancel_newest", "cancel_in_progress", "drop"];

export function allows(limit) {
  const parts = [];
  if (limit.max_running !== null && limit.max_running !== undefined) parts.push(`${limit.max_running} running per key`);
  if (limit.rate) parts.push(`${limit.rate.count} starts per ${limit.rate.period_seconds} s`);
  if (limit.debounce) {
    const wait = limit.debounce.max_wait_seconds ? `, at most ${limit.debounce.max_wait_seconds} s` : "";
    parts.push(`debounce ${limit.debounce.window_seconds} s (keeps the ${limit.debounce.keep}${wait})`);
  }
  return parts.join("; ");
}

// A limit's fields (its name only when it is made: a limit keeps its name), each beside the
// API's field it fills, so a refusal of ``rate.count`` shows by the rate's count.
export function limitFields(limit = null) {
  const fields = [
    { name: "description", label: "Description", initial: limit?.description },
    { name: "max_running", label: "Max running per key", kind: "number", initial: limit?.max_running },
    { name: "rate_count", label: "Rate: starts", kind: "number", initial: limit?.rate?.count, paths: ["rate.count"], hint: "per key, in the period below" },
    { name: "rate_period", label: "Rate: period (s)", kind: "number", initial: limit?.rate?.period_seconds, paths: ["rate.period_seconds", "rate"] },
    { name: "strategy", label: "When a key is full", kind: "select", choices: STRATEGIES.map((one) => [one, one]), initial: limit?.strategy || "queue" },
    { name: "debounce_window", label: "Debounce window (s)", kind: "number", initial: limit?.debounce?.window_seconds, paths: ["debounce.window_seconds"] },
    { name: "debounce_keep", label: "Debounce keeps", kind: "select", choices: [["last", "last"], ["first", "first"]], initial: limit?.debounce?.keep || "last", paths: ["debounce.keep"] },
    { name: "debounce_max_wait", label: "Debounce: at most (s)", kind: "number", initial: limit?.debounce?.max_wait_seconds, paths: ["debounce.max_wait_seconds", "debounce"] },
  ];
  return limit ? fields : [{ name: "name", label: "Name", required: true, hint: "lower case: how jobs, tasks and schedules name it" }, ...fields];
}

// The spec the fields say; what is left empty is null (a PATCH then clears it).
export function limitSpec(values) {
  const rate = values.rate_count !== null || values.rate_period !== null
    ? { count: optional(values.rate_count), period_seconds: optional(values.rate_period) } : null;
  const debounce = values.debounce_window !== null || values.debounce_max_wait !== null
    ? { window_seconds: optional(values.debounce_window), keep: values.debounce_keep, max_wait_seconds: optional(values.debounce_max_wait) }
    : null;
  return { description: values.description, max_running: values.max_running, rate, strategy: values.strategy, debounce };
}

function createForm(ctx) {
  const form = editForm({
    label: "New limit",
    fields: limitFields(),
    ctx,
    idPrefix: "new-limit",
    submitText: "Create limit",
    save: async (values) => {
      const made = await api("/v1/limits", { method: "POST", body: { name: values.name, ...limitSpec(values) } });
      ctx.refresh();
      return `Created limit ${made.name}.`;
    },
  });
  return section("New limit", form.node);
}

export function mount(root, _route, ctx) {
  const body = h("div", { class: "list" });
  root.append(h("h1", {}, "Limits"), h("p", { class: "muted" }, "Flow control by key: what each limit allows per key."), body,
    ctx.may("developer") ? createForm(ctx) : "");
  return {
    async refresh() {
      const page = await api(`/v1/limits${query({ limit: 100 })}`, { signal: ctx.signal });
      const rows = page.items.map((limit) =>
        row([link(limitPath(limit.id), limit.name), allows(limit), limit.strategy, limit.description || ""], { "data-limit": limit.name }),
      );
      fill(body, table(["Limit", "Allows", "When a key is full", "Description"], rows, noneYet("limits", "herder limit create NAME --max-running 2")));
    },
  };
}
