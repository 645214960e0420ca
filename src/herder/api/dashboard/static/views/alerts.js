// Alerts: the tenant's open and resolved incidents, its rules (enabled and disabled here),
// its channels — webhooks, email, Slack (a test delivery sent from here; never a secret, which
// the API shows once, nor a Slack URL's token) — and every delivery with each of its attempts,
// an email's or Slack message's saying how many deliveries it carried. Every list is paged by
// the server.

import { api, query } from "../api.js";
import { action, badge, h, link, row, table, when } from "../dom.js";
import { nameBook } from "../names.js";
import { channelActions, consoleBar, ruleActions } from "./alert_forms.js";
import { noneYet, pagedList, runPath, runsWhat, taskKindOf, workflowRunPath } from "./common.js";
import { schedulePath } from "./schedules.js";

const PAGE = 20;
// The params that name a job, a schedule or a workflow by id: shown by its name.
const NAMED_PARAMS = { job_id: "jobs", schedule_id: "schedules", workflow_id: "workflows" };

function alertsPath(channelId) {
  return `#/alerts${query({ channel: channelId })}`;
}

function json(value) {
  const text = JSON.stringify(value);
  return text === "{}" ? "" : h("code", {}, text);
}

// A rule's params as ``name=value``, a job, schedule or workflow by its name.
function ruleParams(params, names) {
  return Object.entries(params).map(([name, value]) => {
    const shown = Object.hasOwn(NAMED_PARAMS, name) ? names.of(NAMED_PARAMS[name], value)
      : Array.isArray(value) ? value.join(",")
      : typeof value === "object" && value !== null ? JSON.stringify(value)
      : value;
    return h("span", { class: "param" }, `${name}=${shown}`);
  });
}

// What an incident is about, by name: a job or a workflow (linking to its runs), a schedule,
// a run (its job's, or a wait's or an approval's task) or a workflow run, the queue, a loop,
// or a budget (its period, pool and threshold: "day:*:0.8").
function subject(incident, names) {
  const key = incident.key;
  if (key.startsWith("job_")) return link(`#/runs${query({ job_id: key })}`, `job ${names.of("jobs", key)}`);
  if (key.startsWith("wf_")) return link(`#/workflows${query({ workflow: key })}`, `workflow ${names.of("workflows", key)}`);
  if (key.startsWith("sch_")) return link(schedulePath(key), `schedule ${names.of("schedules", key)}`);
  if (key.startsWith("run_")) {
    const run = names.get("runs", key);
    return link(runPath(key), run ? (taskKindOf(run) ? runsWhat(run) : `a run of ${run.job_name}`) : key);
  }
  if (key.startsWith("wfrun_")) {
    const run = names.get("workflow-runs", key);
    return link(workflowRunPath(key), run ? `a run of workflow ${run.workflow_name}` : key);
  }
  const rule = names.get("alert-rules", incident.rule_id);
  const kind = rule ? rule.kind : "";
  if (kind === "queue_wait_p99" || kind === "no_capacity") return link("#/queue", "the queue");
  if (kind === "loop_stale") return `loop ${key}`;
  if (kind === "budget") return `budget ${key}`;
  return key;
}

function incidentRows(items, names) {
  return items.map((incident) =>
    row(
      [
        names.of("alert-rules", incident.rule_id),
        subject(incident, names),
        badge(incident.state),
        incident.summary,
        when(incident.opened_at),
        incident.resolved_at ? when(incident.resolved_at) : ["last seen ", when(incident.last_seen_at)],
        json(incident.details),
      ],
      { "data-incident": incident.id },
    ),
  );
}

function ruleRows(items, names, ctx, editing) {
  return items.map((rule) =>
    row(
      [
        rule.name,
        rule.kind,
        ruleParams(rule.params, names),
        rule.channel_ids.map((id) => h("span", { class: "label" }, names.of("alert-channels", id))),
        rule.enabled ? "enabled" : "disabled",
        rule.notify_recovery ? "yes" : "no",
        ctx.may("developer")
          ? action(
              rule.enabled ? "Disable" : "Enable",
              () => api(`/v1/alert-rules/${encodeURIComponent(rule.id)}`, { method: "PATCH", body: { enabled: !rule.enabled } }),
              { ctx },
            )
          : "",
        ruleActions(rule, names, editing, ctx),
      ],
      { "data-rule": rule.id },
    ),
  );
}

function channelRows(items, ctx, editing) {
  return items.map((channel) =>
    row(
      [
        channel.name,
        channel.kind,
        h("code", {}, channel.url),
        channel.enabled ? "enabled" : "disabled",
        link(alertsPath(channel.id), "deliveries"),
        ctx.may("developer")
          ? action(
              "Send test",
              async () => {
                const queued = await api(`/v1/alert-channels/${encodeURIComponent(channel.id)}/test`, { method: "POST" });
                return `Test delivery ${queued.delivery_id} queued for ${channel.name}`;
              },
              { ctx },
            )
          : "",
        channelActions(channel, editing, ctx),
      ],
      { "data-channel": channel.id },
    ),
  );
}

// An attempt's outcome in words: "HTTP 200", "SMTP 250" (email: the relay's reply code), "the
// receiver answered 500", "could not connect…".
function outcome(status, error, kind) {
  if (error) return error;
  if (status === null || status === undefined) return "no answer";
  return `${kind === "email" ? "SMTP" : "HTTP"} ${status}`;
}

// An email's or Slack message's attempt: how many deliveries went in that one message.
function carried(attempt) {
  const count = attempt.message_deliveries;
  if (!count || count < 2) return "";
  return ` · one message for ${count} deliveries`;
}

// Where a delivery stands, in a sentence: delivered, trying again (when, and why the last
// attempt failed), or given up (why).
function standing(delivery, kind) {
  const tries = `${delivery.attempts} attempt${delivery.attempts === 1 ? "" : "s"}`;
  const last = outcome(delivery.last_status, delivery.last_error, kind);
  if (delivery.state === "delivered") return ["delivered ", when(delivery.delivered_at), ` (${last}, ${tries})`];
  if (delivery.state === "failed") return `gave up after ${tries}: ${last}`;
  if (!delivery.attempts) return "not sent yet";
  return [`attempt ${delivery.attempts} failed: ${last}`, delivery.next_attempt_at ? ["; tries again ", when(delivery.next_attempt_at)] : ""];
}

// Every attempt, folded away under its count: open it to read each one.
function attemptList(history, kind) {
  if (!history.length) return "";
  return h(
    "details",
    { class: "history" },
    h("summary", {}, `${history.length} attempt${history.length === 1 ? "" : "s"}`),
    h("ol", {}, history.map((attempt) => h("li", {}, when(attempt.at), " · ", outcome(attempt.status, attempt.error, kind), carried(attempt)))),
  );
}

function deliveryRows(items, names) {
  return items.map((delivery) => {
    const kind = names.get("alert-channels", delivery.channel_id)?.kind;
    return row(
      [
        h("code", {}, delivery.id),
        link(alertsPath(delivery.channel_id), names.of("alert-channels", delivery.channel_id)),
        delivery.event,
        badge(delivery.state),
        h("span", { class: "standing" }, standing(delivery, kind)),
        when(delivery.created_at),
        attemptList(delivery.history, kind),
      ],
      { "data-delivery": delivery.id },
    );
  });
}

export function mount(root, route, ctx) {
  const names = nameBook(ctx.signal);
  const editing = h("div", { class: "editing" }); // where a rule's or channel's form opens
  const channelId = route.params.get("channel") || "";
  const read = (path, search) => api(`${path}${query(search)}`, { signal: ctx.signal });
  const incidentList = (state) =>
    pagedList(
      ctx,
      async (cursor) => {
        const page = await read("/v1/alerts", { state, limit: PAGE, cursor });
        const keys = page.items.map((incident) => incident.key);
        await Promise.all([
          names.learn("alert-rules", page.items.map((incident) => incident.rule_id)),
          names.learn("jobs", keys.filter((key) => key.startsWith("job_"))),
          names.learn("workflows", keys.filter((key) => key.startsWith("wf_"))),
          names.learn("schedules", keys.filter((key) => key.startsWith("sch_"))),
          names.learn("runs", keys.filter((key) => key.startsWith("run_"))),
          names.learn("workflow-runs", keys.filter((key) => key.startsWith("wfrun_"))),
        ]);
        return page;
      },
      (page) => table(["Rule", "About", "State", "Summary", "Opened", "Resolved", "Details"], incidentRows(page.items, names), `No ${state} incidents.`),
    );
  const open = incidentList("open");
  const resolved = incidentList("resolved");
  const rules = pagedList(
    ctx,
    async (cursor) => {
      const page = await read("/v1/alert-rules", { limit: PAGE, cursor });
      const named = (param) => page.items.map((rule) => rule.params[param]).filter((id) => typeof id === "string");
      await Promise.all([
        names.learn("alert-channels", page.items.flatMap((rule) => rule.channel_ids)),
        ...Object.entries(NAMED_PARAMS).map(([param, collection]) => names.learn(collection, named(param))),
      ]);
      return page;
    },
    (page) => table(["Rule", "Kind", "Params", "Channels", "Enabled", "Recovery notice", "", ""], ruleRows(page.items, names, ctx, editing), noneYet("rules", "herder alert rule create NAME --kind run_failed --channel CHANNEL")),
  );
  const channels = pagedList(
    ctx,
    (cursor) => read("/v1/alert-channels", { limit: PAGE, cursor }),
    (page) => table(["Channel", "Kind", "Address", "Enabled", "", "", ""], channelRows(page.items, ctx, editing), noneYet("channels", "herder alert channel create NAME URL [--kind email|slack]")),
  );
  const deliveries = pagedList(
    ctx,
    async (cursor) => {
      const page = await read("/v1/alert-deliveries", { channel_id: channelId, limit: PAGE, cursor });
      await names.learn("alert-channels", [channelId, ...page.items.map((delivery) => delivery.channel_id)]);
      return page;
    },
    (page) =>
      table(
        ["Delivery", "Channel", "Event", "State", "Outcome", "Made", "Attempts"],
        deliveryRows(page.items, names),
        "No deliveries yet.",
      ),
  );
  const deliveriesHeading = h("h2", {}, "Deliveries");
  root.append(
    h("h1", {}, "Alerts"),
    consoleBar(editing, ctx),
    editing,
    h("h2", {}, "Open incidents"),
    open.node,
    h("h2", {}, "Resolved incidents"),
    resolved.node,
    h("h2", {}, "Rules"),
    rules.node,
    h("h2", {}, "Channels"),
    channels.node,
    deliveriesHeading,
    channelId ? h("p", {}, link(alertsPath(""), "Every channel's deliveries")) : "",
    deliveries.node,
  );
  return {
    async refresh() {
      await Promise.all([open, resolved, rules, channels, deliveries].map((list) => list.refresh()));
      if (channelId) deliveriesHeading.textContent = `Deliveries to ${names.of("alert-channels", channelId)}`;
    },
  };
}
