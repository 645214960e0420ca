// Limits by key (docs/flow-control.md): each limit of the tenant and what it allows per key.

import { api, query } from "../api.js";
import { fill, h, link, row, table } from "../dom.js";
import { noneYet } from "./common.js";

export const limitPath = (id) => `#/limits/${encodeURIComponent(id)}`;

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

export function mount(root, _route, ctx) {
  const body = h("div", { class: "list" });
  root.append(h("h1", {}, "Limits"), h("p", { class: "muted" }, "Flow control by key: what each limit allows per key."), body);
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

