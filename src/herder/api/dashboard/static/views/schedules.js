// Schedules: each with its next fire in its own zone, what it starts, and its counts of
// fires and misses. A key that may change definitions makes one here (views/schedule_form.js).

import { api, query } from "../api.js";
import { h, link, row, table, when } from "../dom.js";
import { nameBook } from "../names.js";
import { dateTime } from "../time.js";
import { creator, mineToggle, mineWanted, noneYet, pagedList } from "./common.js";
import { newSchedule } from "./schedule_form.js";

const PAGE = 50;

// An instant as the wall clock of a zone shows it, e.g. "2026-11-24 09:00 Europe/Paris".
export function inZone(iso, zone) {
  if (!iso) return "";
  try {
    const text = dateTime(iso, zone); // "… GMT+5:30", or "… UTC" in UTC: named once
    return h("time", { datetime: iso, title: iso }, text.endsWith(zone) ? text : `${text} (${zone})`);
  } catch {
    return when(iso);
  }
}

export function schedulePath(id) {
  return `#/schedules/${encodeURIComponent(id)}`;
}

function scheduleRows(items, names) {
  return items.map((schedule) =>
    row([
      link(schedulePath(schedule.id), schedule.name || schedule.id),
      schedule.job_id
        ? link(`#/runs${query({ job_id: schedule.job_id })}`, `job ${names.of("jobs", schedule.job_id)}`)
        : link(`#/workflows${query({ workflow: schedule.workflow_id })}`, `workflow ${names.of("workflows", schedule.workflow_id)}`),
      h("code", {}, schedule.spec.cron),
      schedule.paused ? "paused" : inZone(schedule.next_fire_at, schedule.spec.timezone),
      when(schedule.last_fired_for),
      schedule.fired_count,
      schedule.missed_count,
      schedule.skipped_count,
      creator(schedule),
    ]),
  );
}

export function mount(root, route, ctx) {
  const names = nameBook(ctx.signal);
  const list = pagedList(
    ctx,
    async (cursor) => {
      const page = await api(`/v1/schedules${query({ created_by: mineWanted(route.params), limit: PAGE, cursor })}`, { signal: ctx.signal });
      await Promise.all([
        names.learn("jobs", page.items.map((schedule) => schedule.job_id)),
        names.learn("workflows", page.items.map((schedule) => schedule.workflow_id)),
      ]);
      return page;
    },
    (page) => table(["Schedule", "Starts", "Cron", "Next fire", "Last fired for", "Fired", "Missed", "Skipped", "Created by"], scheduleRows(page.items, names), noneYet("schedules", "herder schedule create JOB '0 3 * * *'")),
  );
  const creating = newSchedule(ctx);
  root.append(h("div", { class: "title-bar" }, h("h1", {}, "Schedules"), creating.button, mineToggle(route, ctx)), creating.node, list.node);
  return list;
}
