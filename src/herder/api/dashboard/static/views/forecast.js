// Forecast: what the schedules foretell for the next hour, a minute at a time, against what
// ended in the last hour (docs/autoscaling.md#forecast). A tenant sees its own schedules.

import { api, query } from "../api.js";
import { stackedBars } from "../charts.js";
import { fill, h, row, table, when } from "../dom.js";

const MINUTES = 60;

export function mount(root, route, ctx) {
  const pool = route.params.get("pool") || "";
  const body = h("div", { class: "list" });
  root.append(
    h("h1", {}, "Forecast"),
    h("p", { class: "muted" }, pool ? `Pool ${pool}.` : "Every pool your key sees."),
    body,
  );
  return {
    async refresh() {
      const [stats, forecast] = await Promise.all([
        api(`/v1/stats?minutes=${MINUTES}`, { signal: ctx.signal }),
        api(`/v1/forecast${query({ pool, minutes: MINUTES })}`, { signal: ctx.signal }),
      ]);
      const past = stats.throughput.map((point) => ({
        minute: point.minute,
        ended: point.succeeded + point.failed + point.cancelled,
      }));
      const ahead = forecast.minutes.map((minute) => ({ minute: minute.at, forecast: minute.runs_starting }));
      const busy = forecast.minutes
        .filter((minute) => minute.runs_starting || minute.runs)
        .map((minute) =>
          row([when(minute.at), String(minute.runs_starting), String(minute.cpu), String(minute.memory_mb),
               String(minute.gpus), String(minute.runs)]),
        );
      fill(
        body,
        h(
          "div",
          { class: "legend" },
          h("span", { class: "key ended" }, "ended, last hour"),
          h("span", { class: "key forecast" }, "starting, next hour (forecast)"),
        ),
        stackedBars([...past, ...ahead], [{ key: "ended" }, { key: "forecast" }], {
          title: "runs per minute: ended, then foretold",
        }),
        h("h2", {}, "Minutes ahead with scheduled work"),
        table(["Minute", "Starting", "CPU busy", "Memory MB", "GPUs", "Runs busy"], busy,
              "No schedule fires in the next hour."),
      );
    },
  };
}
