// Overview: the queue, what runs, what ended in the last hour (charted) and how full the
// fleet is — from one call to /v1/stats.

import { api } from "../api.js";
import { rateLine, stackedBars, utilization } from "../charts.js";
import { h, link, fill } from "../dom.js";

const MINUTES = 60;

function card(label, value, href) {
  const number = h("span", { class: "number" }, value === null || value === undefined ? "–" : value);
  return h("div", { class: "card", "data-stat": label }, href ? link(href, number) : number, h("span", { class: "caption" }, label));
}

function percent(rate) {
  return rate === null || rate === undefined ? "–" : `${(rate * 100).toFixed(1)}%`;
}

export function mount(root, _route, ctx) {
  const body = h("div", { class: "overview" });
  root.append(h("h1", {}, "Overview"), body);
  return {
    async refresh() {
      const stats = await api(`/v1/stats?minutes=${MINUTES}`, { signal: ctx.signal });
      const fleet = stats.scope === "fleet";
      const workers = stats.workers;
      fill(body,
        h("p", { class: "scope" }, fleet ? "Fleet view: every tenant (system admin key)." : "Your tenant's runs."),
        h(
          "div",
          { class: "cards" },
          card("queued", stats.runs.queued, "#/queue"),
          card("running", stats.runs.running, "#/runs?state=running"),
          card("retry_wait", stats.runs.retry_wait, "#/runs?state=retry_wait"),
          card("suspended", stats.runs.suspended, "#/runs?state=suspended"),
          card("dead", stats.runs.dead, "#/dead"),
          card("succeeded (1 h)", stats.ended.succeeded),
          card("failed (1 h)", stats.ended.failed),
          card("failure rate (1 h)", percent(stats.failure_rate)),
        ),
        h("h2", {}, "Throughput per minute, last hour"),
        h(
          "div",
          { class: "legend" },
          h("span", { class: "key succeeded" }, "succeeded"),
          h("span", { class: "key failed" }, "failed"),
          h("span", { class: "key cancelled" }, "cancelled"),
        ),
        stackedBars(
          stats.throughput,
          [{ key: "succeeded" }, { key: "failed" }, { key: "cancelled" }],
          { title: "runs ended per minute" },
        ),
        h("h2", {}, "Failure rate per minute"),
        rateLine(stats.throughput, { title: "failure rate per minute" }),
        h("h2", {}, fleet ? "Worker utilization" : "Resources your runs hold"),
        utilization(stats.resources.used, stats.resources.capacity),
        workers
          ? h(
              "div",
              { class: "cards" },
              card("workers alive", workers.alive, "#/workers"),
              card("draining", workers.draining, "#/workers"),
              card("lost", workers.lost, "#/workers"),
            )
          : h("p", { class: "muted" }, "The fleet's capacity and workers need a system admin key."),
      );
    },
  };
}
