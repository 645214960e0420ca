// Overview: the queue, what runs, what ended in the chosen window (charted, and its recent
// failures listed) and how full the fleet is — from /v1/stats and /v1/runs.

import { api, query } from "../api.js";
import { rateLine, stackedBars, utilization } from "../charts.js";
import { badge, h, link, fill, row, table, when } from "../dom.js";
import { FAILED_RUN_STATES, LIVE_RUN_STATES, OUTCOMES, STATS_MAX_MINUTES } from "../states.js";
import { WINDOWS, chosenWindow, windowPicker, windowStart } from "../window.js";
import { runPath, taskKindOf } from "./common.js";

const OFFERED = WINDOWS.filter((one) => one.minutes <= STATS_MAX_MINUTES);
const FAILURES_SHOWN = 20;

function card(label, value, href) {
  const number = h("span", { class: "number" }, value === null || value === undefined ? "–" : value);
  return h("div", { class: "card", "data-stat": label }, href ? link(href, number) : number, h("span", { class: "caption" }, label));
}

// Where a live state's count leads: the queue and the dead-letter list have views of their own.
const LISTED_AT = { queued: "#/queue", dead: "#/dead" };

function liveCard(state, count) {
  return card(state, count, LISTED_AT[state] || `#/runs?state=${state}`);
}

function percent(rate) {
  return rate === null || rate === undefined ? "–" : `${(rate * 100).toFixed(1)}%`;
}

// The window's failed, timed-out, lost, dead and expired runs, newest first: work that
// failed, so not a rejected approval nor a wait that timed out (the stats count neither).
function failures(page) {
  return table(
    ["Run", "Job", "State", "Created", "Reason"],
    page.items.filter((run) => !taskKindOf(run)).map((run) =>
      row([link(runPath(run.id), run.id), run.job_name, badge(run.state), when(run.created_at), run.reason || ""], { "data-run": run.id }),
    ),
    "No failures in this window.",
  );
}

export function mount(root, route, ctx) {
  const chosen = chosenWindow(route.params, OFFERED);
  const span = chosen.label;
  const body = h("div", { class: "overview" });
  const picker = windowPicker(chosen, (key) => ctx.go(`#/overview${query({ window: key })}`), { offered: OFFERED });
  root.append(h("div", { class: "title-bar" }, h("h1", {}, "Overview"), picker), body);
  return {
    async refresh() {
      const failed = { state: FAILED_RUN_STATES, since: windowStart(chosen), limit: FAILURES_SHOWN };
      const [stats, recent] = await Promise.all([
        api(`/v1/stats?minutes=${chosen.minutes}`, { signal: ctx.signal }),
        api(`/v1/runs${query(failed)}`, { signal: ctx.signal }),
      ]);
      const fleet = stats.scope === "fleet";
      const workers = stats.workers;
      fill(body,
        h("p", { class: "scope" }, fleet ? "Fleet view: every tenant (system admin key)." : "Your tenant's runs."),
        h(
          "div",
          { class: "cards" },
          ...LIVE_RUN_STATES.map((state) => liveCard(state, stats.runs[state])),
          card("awaiting approval", stats.awaiting_approval, "#/workflows"),
          ...OUTCOMES.map((outcome) => card(`${outcome} (${span})`, stats.ended[outcome])),
          card(`failure rate (${span})`, percent(stats.failure_rate)),
        ),
        h("h2", {}, `Recent failures, last ${span}`),
        h("div", { class: "failures" }, failures(recent)),
        h("h2", {}, `Throughput per minute, last ${span}`),
        h(
          "div",
          { class: "legend" },
          ...OUTCOMES.map((outcome) => h("span", { class: `key ${outcome}` }, outcome)),
        ),
        stackedBars(
          stats.throughput,
          OUTCOMES.map((key) => ({ key })),
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
