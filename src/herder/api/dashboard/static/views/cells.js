// Every cell behind the edge (the default cell's system admins; GET /v1/cells, which the
// edge answers itself): its region, whether it answers, its tenants, which is the default.
// A Herder served with no edge (herder up, herder server) is one cell and has no /v1/cells:
// its 404 is said as that, not as an error.

import { ApiError, api } from "../api.js";
import { fill, h, row, table } from "../dom.js";

function health(cell) {
  return h("span", { class: `state tone-${cell.up ? "ok" : "bad"}`, "data-health": cell.up ? "up" : "down" }, cell.up ? "up" : "down");
}

// What the page says instead of the list, for an answer that is not one.
function instead(error) {
  if (!(error instanceof ApiError)) return null;
  if (error.status === 404) {
    return [
      "One cell, no edge: this Herder is served by itself, so there are no other cells to show. ",
      "Cells and regions come with ",
      h("code", { class: "command" }, "herder edge"),
      " in front of several Herders (docs/cells.md).",
    ];
  }
  if (error.status === 403) return `The cells need a system admin key of the default cell: ${error.message}`;
  return null;
}

export function mount(root, _route, ctx) {
  const list = h("div", { class: "list" });
  root.append(h("h1", {}, "Cells"), h("p", { class: "muted" }, "Every cell behind the edge, each asked whether it answers as the page refreshes."), list);
  return {
    async refresh() {
      let listing;
      try {
        listing = await api("/v1/cells", { signal: ctx.signal });
      } catch (error) {
        const said = instead(error);
        if (said === null) throw error;
        fill(list, h("p", { class: "empty", "data-cells": "none" }, said));
        return;
      }
      const rows = listing.items.map((cell) =>
        row([cell.name, cell.region, health(cell), String(cell.tenants), cell.is_default ? "default" : "", h("code", {}, cell.api_url)], { "data-cell": cell.name }),
      );
      fill(list, table(["Cell", "Region", "Health", "Tenants", "Default", "API"], rows, "No cells."));
    },
  };
}
