// One run: what it is, its attempts, its timeline of events, its output and its logs, which
// follow the running attempt live (long-polling /logs with its cursor).

import { ApiError, api, query } from "../api.js";
import { runTimeline } from "../charts.js";
import { badge, between, facts, h, link, resources, row, table, when, fill } from "../dom.js";
import { logView } from "../logview.js";
import { createdLine, deadline, isActive, runActions, runPath, runsWhatLink, suspendActions, taskKindOf, workflowRunPath } from "./common.js";
import { jobPath } from "./jobs.js";
import { STARTS_AT_RUN_STATES } from "../states.js";

const IDLE_MS = 1000;

function attemptRows(attempts) {
  return attempts.map((attempt) =>
    row([
      attempt.borrowed ? [attempt.number, " ", h("span", { class: "muted borrowed" }, "borrowed")] : attempt.number,
      attempt.rank,
      attempt.worker_name ? h("span", { title: attempt.worker_id }, attempt.worker_name) : h("code", {}, attempt.worker_id),
      badge(attempt.state),
      attempt.exit_code ?? "",
      attempt.reason || "",
      when(attempt.started_at),
      between(attempt.started_at, attempt.finished_at),
      attempt.max_rss_kb ? `${Math.round(attempt.max_rss_kb / 1024)} MB` : "",
    ]),
  );
}

// Who made a change: a key by its name and role ("bootstrap admin (admin)"), a worker by its
// name (the API's actor_name); the scheduler's own actors as they are.
function actor(event) {
  return event.actor_name ? h("span", { title: event.actor }, event.actor_name) : event.actor;
}

// The values its job's declared parameters took (a run's spec holds them in its env, which
// the page shows nothing else of), each as ``name=value``.
function parameters(run, declared) {
  const env = run.spec.env || {};
  return declared.filter((name) => Object.hasOwn(env, name)).map((name) => h("span", { class: "param" }, `${name}=${env[name]}`));
}

function eventRows(events) {
  return events.map((event) =>
    row([when(event.at), event.to_state ? [event.from_state || "", " → ", event.to_state] : "", event.attempt ?? "", actor(event), event.message]),
  );
}

const sleep = (ms, signal) =>
  new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });

// Resolves once the tab is visible (at once if it is) or the signal aborts.
const visible = (signal) =>
  new Promise((resolve) => {
    if (!document.hidden || signal.aborted) {
      resolve();
      return;
    }
    const done = () => {
      document.removeEventListener("visibilitychange", shown);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const shown = () => {
      if (!document.hidden) done();
    };
    document.addEventListener("visibilitychange", shown);
    signal.addEventListener("abort", done);
  });

// ``perform(signal)`` with a signal that also aborts when the tab is hidden: a hidden tab
// holds no long poll open.
async function untilHidden(signal, perform) {
  const hidden = new AbortController();
  const hide = () => {
    if (document.hidden) hidden.abort();
  };
  document.addEventListener("visibilitychange", hide);
  try {
    return await perform(AbortSignal.any([signal, hidden.signal]));
  } finally {
    document.removeEventListener("visibilitychange", hide);
  }
}

async function parameterNames(run, signal) {
  if (taskKindOf(run)) return [];
  try {
    const job = await api(`/v1/jobs/${encodeURIComponent(run.job_id)}`, { signal });
    return (job.spec.parameters || []).map((parameter) => parameter.name);
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return [];
    throw error;
  }
}

export function mount(root, route, ctx) {
  const id = route.id;
  const summary = h("div", { class: "run-summary" });
  const logHead = h("p", { class: "muted" }, "Waiting for an attempt…");
  const ranks = h("select", { id: "rank", onchange: () => followRank(Number(ranks.value)) });
  const rankPicker = h("label", { class: "rank", hidden: true }, "Gang member ", ranks);
  let rank = 0; // the gang member whose logs are shown
  const logs = logView(() => `${id}${ranks.options.length > 1 ? `-rank${rank}` : ""}.txt`);
  root.append(summary, h("h2", {}, "Logs"), rankPicker, logHead, logs.tools, logs.pre);
  let latest = null; // the run as last read
  let declared = null; // its job's parameters' names, read once (none for a wait or a job gone)
  let following = null; // the AbortController of the rank's follow

  function show(run) {
    fill(summary,
      h("h1", {}, "Run ", h("code", {}, run.id)),
      h(
        "p",
        { class: "headline" },
        badge(run.state),
        run.cancel_requested && isActive(run.state) ? " cancel requested " : " ",
        runActions(run, ctx),
        " ",
        suspendActions(run, ctx),
      ),
      createdLine(run),
      facts([
        taskKindOf(run) ? ["Task", runsWhatLink(run)] : ["Job", [runsWhatLink(run), " · ", link(jobPath(run.job_id), "the job")]],
        ["Params", parameters(run, declared)],
        ["Runs", [run.spec.runtime, run.spec.command ? [" · ", h("code", {}, run.spec.command)] : ""]],
        ["Args", run.spec.args.length ? h("code", {}, JSON.stringify(run.spec.args)) : ""],
        ["Priority", run.spec.priority],
        ["Resources", resources(run.spec.resources)],
        ["Created", when(run.created_at)],
        ["Starts at", STARTS_AT_RUN_STATES.includes(run.state) ? when(run.run_at) : ""],
        ["Queued", when(run.queued_at)],
        ["Started", when(run.started_at)],
        ["Finished", when(run.finished_at)],
        ["Deadline", deadline(run)],
        ["Took", between(run.started_at, run.finished_at)],
        ["Exit code", run.exit_code],
        ["Reason", run.reason],
        ["Waiting because", run.waiting_reason],
        ["Borrowed", run.borrowed ? "placed past its tenant's share of the pool: it may be reclaimed" : ""],
        ["Retry at", when(run.retry_at)],
        ["Re-run of", run.rerun_of ? link(runPath(run.rerun_of), run.rerun_of) : ""],
        ["Workflow run", run.workflow_run_id ? link(workflowRunPath(run.workflow_run_id), `${run.workflow_run_id} · ${run.task_name}`) : ""],
        ["Idempotency key", run.idempotency_key],
      ]),
      h("h2", {}, "Attempts"),
      table(["#", "Rank", "Worker", "State", "Exit", "Reason", "Started", "Took", "Max RSS"], attemptRows(run.attempts), "No attempt yet."),
      h("h2", {}, "Timeline"),
      runTimeline(run),
      table(["At", "Change", "Attempt", "By", "What"], eventRows(run.events), "No events."),
      run.output === null || run.output === undefined ? "" : [h("h2", {}, "Output"), h("pre", { class: "output" }, JSON.stringify(run.output, null, 2))],
    );
  }

  // Follows one gang member's logs from attempt to attempt. Paused while the tab is hidden,
  // it resumes from its cursor.
  async function follow(rank, signal) {
    let attempt = null;
    let after = -1;
    while (!signal.aborted) {
      await visible(signal);
      if (signal.aborted) return;
      try {
        const search = { attempt, rank, after, follow: true };
        const path = `/v1/runs/${encodeURIComponent(id)}/logs${query(search)}`;
        const page = await untilHidden(signal, (either) => api(path, { signal: either }));
        if (signal.aborted) return; // another rank is followed now
        if (page.attempt === null) {
          await sleep(IDLE_MS, signal);
          continue;
        }
        if (attempt === null || page.attempt !== attempt) {
          attempt = page.attempt;
          logHead.textContent = `Attempt ${attempt}`;
        }
        logs.append(page.chunks);
        after = page.next_after;
        if (page.complete) {
          logHead.textContent = `Attempt ${attempt} · complete`;
          if (latest && latest.attempt_count > attempt) {
            attempt += 1;
            after = -1;
            logs.separator(`\n── attempt ${attempt} ──\n`);
          } else if (latest && !isActive(latest.state)) {
            return;
          } else {
            await sleep(IDLE_MS, signal);
          }
        }
      } catch (error) {
        if (signal.aborted || (error.name === "AbortError" && document.hidden)) continue;
        ctx.fail(error, "refresh");
        await sleep(2 * IDLE_MS, signal);
      }
    }
  }

  function followRank(chosen) {
    if (following) following.abort();
    following = new AbortController();
    rank = chosen;
    logs.clear();
    logHead.textContent = "Waiting for an attempt…";
    follow(rank, AbortSignal.any([ctx.signal, following.signal]));
  }

  // A gang's members each have their own logs: a picker once the run has more than one.
  function showRanks(replicas) {
    if (replicas <= 1 || ranks.options.length === replicas) return;
    fill(ranks, Array.from({ length: replicas }, (_, rank) => h("option", { value: rank }, `rank ${rank}`)));
    rankPicker.hidden = false;
  }

  followRank(0);
  return {
    async refresh() {
      const run = await api(`/v1/runs/${encodeURIComponent(id)}`, { signal: ctx.signal });
      if (declared === null) declared = await parameterNames(run, ctx.signal);
      // An ended run is redrawn only when it changes (a selection in it holds); an active one
      // every time, as its durations grow.
      const changed = !latest || JSON.stringify(run) !== JSON.stringify(latest);
      latest = run;
      showRanks(run.spec.replicas || 1);
      if (changed || isActive(run.state)) show(run);
    },
  };
}
