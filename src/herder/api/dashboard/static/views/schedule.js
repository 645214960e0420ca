// One schedule: its next fires in its zone, and its recent fires, misses and skips.

import { api } from "../api.js";
import { h, link, row, table, when, fill } from "../dom.js";
import { runPath } from "./common.js";
import { inZone } from "./schedules.js";

const SHOWN_EVENTS = 50;

export function mount(root, route, ctx) {
  const id = encodeURIComponent(route.id);
  const body = h("div", {});
  root.append(body);
  return {
    async refresh() {
      const [schedule, preview, events] = await Promise.all([
        api(`/v1/schedules/${id}`, { signal: ctx.signal }),
        api(`/v1/schedules/${id}/next?count=5`, { signal: ctx.signal }),
        api(`/v1/schedules/${id}/events`, { signal: ctx.signal }),
      ]);
      const zone = schedule.spec.timezone;
      const recent = events.slice(-SHOWN_EVENTS).reverse();
      fill(body,
        h("h1", {}, "Schedule ", h("code", {}, schedule.name || schedule.id)),
        h("p", {}, h("code", {}, schedule.spec.cron), ` in ${zone}`, schedule.paused ? " · paused" : ""),
        h("h2", {}, "Next fires"),
        table(["In its zone", "UTC"], preview.fires.map((fire) => row([fire.local, when(fire.utc)])), "No more fires."),
        h("h2", {}, "Recent fires and misses"),
        table(
          ["At", "What", "Scheduled for", "Run", "Message"],
          recent.map((event) =>
            row(
              [
                when(event.at),
                h("span", { class: `event-${event.kind}` }, event.kind),
                event.scheduled_for ? inZone(event.scheduled_for, zone) : "",
                event.run_id ? link(runPath(event.run_id), event.run_id) : "",
                event.message,
              ],
            ),
          ),
          "Nothing yet.",
        ),
      );
    },
  };
}
