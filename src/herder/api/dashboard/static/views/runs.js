// Runs: newest first, filtered and paged by the server (job, state, time), so the page is as
// quick with 100,000 stored runs as with ten.

import { api, query } from "../api.js";
import { badge, between, h, link, row, table, when } from "../dom.js";
import { RUN_STATES } from "../states.js";
import { WINDOWS, chosenWindow, windowPicker, windowStart } from "../window.js";
import { creator, isActive, mineToggle, mineWanted, pagedList, runActions, runPath, runsWhatLink } from "./common.js";

const PAGE = 50;

// "2026-11-24 10:00" (seconds optional) is the browser's local time, written as every view
// writes times (time.js); the API wants an offset. Anything else is left to the API's 422.
function toIso(local) {
  if (!local) return "";
  const moment = new Date(local.trim().replace(" ", "T"));
  return Number.isNaN(moment.getTime()) ? local : moment.toISOString();
}

function filterForm(route, ctx) {
  const params = route.params;
  const job = h("input", { name: "job", placeholder: "job name", value: params.get("job") || "" });
  const state = h(
    "select",
    { name: "state" },
    h("option", { value: "" }, "any state"),
    RUN_STATES.map((one) => h("option", { value: one, selected: params.get("state") === one }, one)),
  );
  const moment = (name) => h("input", { name, placeholder: "2026-11-28 14:03", size: 16, value: params.get(name) || "" });
  const since = moment("since");
  const until = moment("until");
  const lookBack = windowPicker(chosenWindow(params, WINDOWS, null), null, { anyText: "any time" });
  return h(
    "form",
    {
      class: "filters",
      onsubmit: (event) => {
        event.preventDefault();
        const mine = event.currentTarget.elements.mine.checked ? "1" : "";
        const chosen = { job: job.value.trim(), state: state.value, window: lookBack.value, since: since.value, until: until.value, mine };
        ctx.go(`#/runs${query(chosen)}`);
      },
    },
    h("label", {}, "Job ", job),
    h("label", {}, "State ", state),
    h("label", {}, "Window ", lookBack),
    h("label", {}, "Since ", since),
    h("label", {}, "Until ", until),
    mineToggle(route, ctx),
    h("button", { type: "submit" }, "Filter"),
    link("#/runs", "Clear"),
  );
}

export function runRows(items, ctx) {
  return items.map((run) =>
    row(
      [
        link(runPath(run.id), run.id),
        runsWhatLink(run),
        [badge(run.state), run.cancel_requested && isActive(run.state) ? " cancel requested" : ""],
        run.attempt_count,
        when(run.created_at),
        between(run.started_at, run.finished_at),
        run.waiting_reason || run.reason || "",
        creator(run),
        runActions(run, ctx),
      ],
      { "data-run": run.id },
    ),
  );
}

export const RUN_HEADINGS = ["Run", "Job", "State", "Attempts", "Created", "Took", "Why", "Created by", ""];

export function mount(root, route, ctx) {
  const params = route.params;
  const jobName = params.get("job");
  const lookBack = chosenWindow(params, WINDOWS, null); // a window slides: since = now − it
  let jobId = params.get("job_id"); // or the named job's id, once looked up
  const list = pagedList(
    ctx,
    async (cursor) => {
      if (jobName && jobId === null) {
        const jobs = await api(`/v1/jobs${query({ name: jobName, limit: 1 })}`, { signal: ctx.signal });
        jobId = jobs.items.length ? jobs.items[0].id : "";
      }
      if (jobName && !jobId) return { items: [], next_cursor: null };
      const search = {
        job_id: jobId || "",
        state: params.get("state") || "",
        since: lookBack ? windowStart(lookBack) : toIso(params.get("since")),
        until: toIso(params.get("until")),
        created_by: mineWanted(params),
        limit: PAGE,
        cursor,
      };
      return api(`/v1/runs${query(search)}`, { signal: ctx.signal });
    },
    (page) => table(RUN_HEADINGS, runRows(page.items, ctx), jobName && !jobId ? `No job is named ${jobName}.` : "No runs match."),
  );
  root.append(h("h1", {}, "Runs"), filterForm(route, ctx), list.node);
  return list;
}
