// One run: what it is, its attempts, its timeline of events, its output and its logs, which
// follow the running attempt live (long-polling /logs with its cursor).

import { api, query } from "../api.js";
import { runTimeline } from "../charts.js";
import { badge, between, h, link, resources, row, table, when, fill } from "../dom.js";
import { isActive, runActions, runPath } from "./common.js";

const IDLE_MS = 1000;

function facts(pairs) {
  return h(
    "dl",
    { class: "facts" },
    pairs.filter(([, value]) => value !== "" && value !== null && value !== undefined).map(([name, value]) => [h("dt", {}, name), h("dd", {}, value)]),
  );
}

function attemptRows(attempts) {
  return attempts.map((attempt) =>
    row([
      attempt.number,
      attempt.rank,
      attempt.worker_id,
      badge(attempt.state),
      attempt.exit_code ?? "",
      attempt.reason || "",
      when(attempt.started_at),
      between(attempt.started_at, attempt.finished_at),
      attempt.max_rss_kb ? `${Math.round(attempt.max_rss_kb / 1024)} MB` : "",
    ]),
  );
}

function eventRows(events) {
  return events.map((event) =>
    row([when(event.at), event.to_state ? [event.from_state || "", " → ", event.to_state] : "", event.attempt ?? "", event.actor, event.message]),
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

export function mount(root, route, ctx) {
  const id = route.id;
  const summary = h("div", { class: "run-summary" });
  const logHead = h("p", { class: "muted" }, "Waiting for an attempt…");
  const logs = h("pre", { class: "logs", id: "logs", tabindex: "0" });
  root.append(summary, h("h2", {}, "Logs"), logHead, logs);
  let latest = null; // the run as last read

  function show(run) {
    fill(summary,
      h("h1", {}, "Run ", h("code", {}, run.id)),
      h("p", { class: "headline" }, badge(run.state), run.cancel_requested && isActive(run.state) ? " cancel requested " : " ", runActions(run, ctx)),
      facts([
        ["Job", link(`#/runs${query({ job: run.job_name })}`, run.job_name)],
        ["Runs", [run.spec.runtime, run.spec.command ? [" · ", h("code", {}, run.spec.command)] : ""]],
        ["Args", run.spec.args.length ? h("code", {}, JSON.stringify(run.spec.args)) : ""],
        ["Priority", run.spec.priority],
        ["Resources", resources(run.spec.resources)],
        ["Created", when(run.created_at)],
        ["Queued", when(run.queued_at)],
        ["Started", when(run.started_at)],
        ["Finished", when(run.finished_at)],
        ["Took", between(run.started_at, run.finished_at)],
        ["Exit code", run.exit_code],
        ["Reason", run.reason],
        ["Waiting because", run.waiting_reason],
        ["Retry at", when(run.retry_at)],
        ["Re-run of", run.rerun_of ? link(runPath(run.rerun_of), run.rerun_of) : ""],
        ["Workflow run", run.workflow_run_id ? link(`#/workflow-runs/${encodeURIComponent(run.workflow_run_id)}`, `${run.workflow_run_id} · ${run.task_name}`) : ""],
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

  function write(chunks) {
    const atBottom = logs.scrollTop + logs.clientHeight >= logs.scrollHeight - 4;
    for (const chunk of chunks) logs.append(h("span", { class: `stream-${chunk.stream}` }, chunk.text));
    if (atBottom) logs.scrollTop = logs.scrollHeight;
  }

  async function follow() {
    let attempt = null;
    let after = -1;
    while (!ctx.signal.aborted) {
      try {
        const page = await api(`/v1/runs/${encodeURIComponent(id)}/logs${query({ attempt, after, follow: true })}`, { signal: ctx.signal });
        if (page.attempt === null) {
          await sleep(IDLE_MS, ctx.signal);
          continue;
        }
        if (attempt === null || page.attempt !== attempt) {
          attempt = page.attempt;
          logHead.textContent = `Attempt ${attempt}`;
        }
        write(page.chunks);
        after = page.next_after;
        if (page.complete) {
          logHead.textContent = `Attempt ${attempt} · complete`;
          if (latest && latest.attempt_count > attempt) {
            attempt += 1;
            after = -1;
            logs.append(h("span", { class: "separator" }, `\n── attempt ${attempt} ──\n`));
          } else if (latest && !isActive(latest.state)) {
            return;
          } else {
            await sleep(IDLE_MS, ctx.signal);
          }
        }
      } catch (error) {
        ctx.fail(error, "refresh");
        await sleep(2 * IDLE_MS, ctx.signal);
      }
    }
  }

  follow();
  return {
    async refresh() {
      const run = await api(`/v1/runs/${encodeURIComponent(id)}`, { signal: ctx.signal });
      // An ended run is redrawn only when it changes (a selection in it holds); an active one
      // every time, as its durations grow.
      const changed = !latest || JSON.stringify(run) !== JSON.stringify(latest);
      latest = run;
      if (changed || isActive(run.state)) show(run);
    },
  };
}
