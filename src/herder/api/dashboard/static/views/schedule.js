// One schedule: what it starts (its job or workflow, with its params) and under which
// policies, its next fires in its zone, the runs its fires started, and its recent fires,
// misses and skips. A key that may change definitions edits or deletes it here
// (views/schedule_form.js).

import { api, query } from "../api.js";
import { action, badge, between, duration, facts, h, link, row, table, when, fill } from "../dom.js";
import { nameBook } from "../names.js";
import { createdLine, pagedList, runActions, runPath } from "./common.js";
import { jobPath } from "./jobs.js";
import { scheduleEditing } from "./schedule_form.js";
import { inZone } from "./schedules.js";

const SHOWN_EVENTS = 50;
const RUNS_PAGE = 20;

// Its runs, newest first: which fire started each (a manual run that asked for the
// schedule's concurrency rule has none), how it went, and what can be done with it.
function runsOf(scheduleId, zone, ctx) {
  return pagedList(
    ctx,
    (cursor) =>
      api(`/v1/runs${query({ schedule_id: scheduleId, limit: RUNS_PAGE, cursor })}`, { signal: ctx.signal }),
    (page) =>
      table(
        ["Run", "Scheduled for", "State", "Started", "Took", ""],
        page.items.map((run) =>
          row(
            [
              link(runPath(run.id), run.id),
              run.scheduled_for ? inZone(run.scheduled_for, zone()) : "by hand",
              badge(run.state),
              when(run.started_at),
              between(run.started_at, run.finished_at),
              runActions(run, ctx),
            ],
            { "data-run": run.id },
          ),
        ),
        "No runs yet.",
      ),
  );
}

// Pause or Resume, and Fire now (paused or not; under its concurrency policy, which may
// refuse it): for a key that may (an operator's or more).
function scheduleActions(schedule, ctx) {
  if (!ctx.may("operator")) return [];
  const path = `/v1/schedules/${encodeURIComponent(schedule.id)}`;
  const post = (verb) => () => api(`${path}/${verb}`, { method: "POST" });
  const fire = async () => {
    const fired = await api(`${path}/trigger`, { method: "POST" });
    return `Fired now: started ${fired.run_id || fired.workflow_run_id}`;
  };
  return [
    schedule.paused ? action("Resume", post("resume"), { ctx }) : action("Pause", post("pause"), { ctx }),
    " ",
    action("Fire now", fire, { ctx }),
  ];
}

function value(one) {
  return typeof one === "string" ? one : JSON.stringify(one);
}

// What it starts, with what, and the policies its fires follow, as ``name value`` facts.
function settings(schedule, names, zone) {
  const spec = schedule.spec;
  const overrides = spec.overrides || {};
  const starts = schedule.job_id
    ? ["job ", link(jobPath(schedule.job_id), names.of("jobs", schedule.job_id))]
    : ["workflow ", link(`#/workflows${query({ workflow: schedule.workflow_id })}`, names.of("workflows", schedule.workflow_id))];
  const params = Object.entries(overrides.params || {}).map(([name, one]) => h("span", { class: "param" }, `${name}=${value(one)}`));
  return facts([
    ["Starts", starts],
    ["Params", params.length ? params : "its defaults"],
    ["Concurrency", spec.concurrency_policy],
    ["Misfires", `${spec.misfire_policy} (at most ${spec.misfire_limit} made up)`],
    ["Jitter", spec.jitter_seconds ? `up to ${duration(spec.jitter_seconds)}` : ""],
    ["From", spec.start_at ? inZone(spec.start_at, zone) : ""],
    ["Until", spec.end_at ? inZone(spec.end_at, zone) : ""],
    ["Deadline", spec.deadline ? `within ${duration(spec.deadline.within_seconds)} of each fire${spec.deadline.cancel ? ", cancelled past it" : ""}` : ""],
    ["Pool", overrides.pool || ""],
    ["Priority", overrides.priority ?? ""],
    ["Limits", (spec.limits || []).map((limit) => h("span", { class: "param" }, `${limit.limit}=${limit.key}`))],
  ]);
}

export function mount(root, route, ctx) {
  const id = encodeURIComponent(route.id);
  const names = nameBook(ctx.signal);
  const head = h("div", {});
  const body = h("div", {});
  const editing = scheduleEditing(route.id, ctx); // its form stays open across refreshes
  let zone = "UTC"; // the schedule's, read before its runs are drawn
  const runs = runsOf(route.id, () => zone, ctx);
  root.append(head, editing.node, body);
  return {
    async refresh() {
      const [schedule, preview, events] = await Promise.all([
        api(`/v1/schedules/${id}`, { signal: ctx.signal }),
        api(`/v1/schedules/${id}/next?count=5`, { signal: ctx.signal }),
        api(`/v1/schedules/${id}/events`, { signal: ctx.signal }),
      ]);
      zone = schedule.spec.timezone;
      await Promise.all([names.learn("jobs", [schedule.job_id]), names.learn("workflows", [schedule.workflow_id])]);
      await runs.refresh(); // after the zone is known: its fire times are shown in it
      const recent = events.slice(-SHOWN_EVENTS).reverse();
      fill(head,
        h("h1", {}, "Schedule ", h("code", {}, schedule.name || schedule.id)),
        h("p", { class: "headline" }, h("code", {}, schedule.spec.cron), ` in ${zone}`, schedule.paused ? " · paused " : " ", ...scheduleActions(schedule, ctx), " ", ...editing.actions(schedule)),
        createdLine(schedule),
        settings(schedule, names, zone),
      );
      fill(body,
        h("h2", {}, "Next fires"),
        table(["In its zone", "In your zone"], preview.fires.map((fire) => row([inZone(fire.utc, zone), when(fire.utc)])), "No more fires."),
        h("h2", {}, "Runs"),
        runs.node,
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
