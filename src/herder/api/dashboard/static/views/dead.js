// Dead letters: runs whose retries are used up, to inspect and re-run by hand.

import { api, query } from "../api.js";
import { h, table } from "../dom.js";
import { pagedList } from "./common.js";
import { RUN_HEADINGS, runRows } from "./runs.js";

const PAGE = 50;

export function mount(root, _route, ctx) {
  const list = pagedList(
    ctx,
    (cursor) => api(`/v1/runs${query({ state: "dead", limit: PAGE, cursor })}`, { signal: ctx.signal }),
    (page) => table(RUN_HEADINGS, runRows(page.items, ctx), "No dead runs."),
  );
  root.append(
    h("h1", {}, "Dead letters"),
    h("p", { class: "muted" }, "Runs that used up every retry. Re-run starts a new run of the same spec."),
    list.node,
  );
  return list;
}
