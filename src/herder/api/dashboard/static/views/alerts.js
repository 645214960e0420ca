// Alerts: the tenant's open and resolved incidents, its rules (enabled and disabled here),
// its channels (a test delivery sent from here; never their secret, which the API shows once)
// and every delivery with each of its attempts. Every list is paged by the server.

import { api, query } from "../api.js";
import { action, badge, h, link, row, table, when } from "../dom.js";
import { nameBook } from "../names.js";
import { pagedList } from "./common.js";
import { schedulePath } from "./schedules.js";

const PAGE = 20;

function alertsPath(channelId) {
  return `#/alerts${query({ channel: channelId })}`;
}

function json(value) {
  const text = JSON.stringify(value);
  return text === "{}" ? "" : h("code", {}, text);
}

// What an incident is about: a job's or a workflow's name links to its runs.
function subject(key, names) {
  if (key.startsWith("job_")) return link(`#/runs${query({ job_id: key })}`, names.of("jobs", key));
  if (key.startsWith("wf_")) return link(`#/workflows${query({ workflow: key })}`, names.of("workflows", key));
  if (key.startsWith("sch_")) return link(schedulePath(key), names.of("schedules", key));
  return h("code", {}, key);
}

function incidentRows(items, names) {
  return items.map((incident) =>
    row(
      [
        names.of("alert-rules", incident.rule_id),
        subject(incident.key, names),
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

function ruleRows(items, names, ctx) {
  return items.map((rule) =>
    row(
      [
        rule.name,
        rule.kind,
        json(rule.params),
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
      ],
      { "data-rule": rule.id },
    ),
  );
}

function channelRows(items, ctx) {
  return items.map((channel) =>
    row(
      [
        channel.name,
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
      ],
      { "data-channel": channel.id },
    ),
  );
}

function attemptList(history) {
  if (!history.length) return "";
  return h(
    "ol",
    { class: "history" },
    history.map((attempt) => h("li", {}, when(attempt.at), " · ", attempt.status ?? "no answer", attempt.error ? [" · ", attempt.error] : "")),
  );
}

function deliveryRows(items, names) {
  return items.map((delivery) =>
    row(
      [
        h("code", {}, delivery.id),
        link(alertsPath(delivery.channel_id), names.of("alert-channels", delivery.channel_id)),
        delivery.event,
        badge(delivery.state),
        delivery.attempts,
        delivery.last_status ?? "",
        delivery.last_error || "",
        when(delivery.created_at),
        delivery.delivered_at ? when(delivery.delivered_at) : delivery.next_attempt_at ? ["next ", when(delivery.next_attempt_at)] : "",
        attemptList(delivery.history),
      ],
      { "data-delivery": delivery.id },
    ),
  );
}

export function mount(root, route, ctx) {
  const names = nameBook(ctx.signal);
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
      await names.learn("alert-channels", page.items.flatMap((rule) => rule.channel_ids));
      return page;
    },
    (page) => table(["Rule", "Kind", "Params", "Channels", "Enabled", "Recovery notice", ""], ruleRows(page.items, names, ctx), "No rules."),
  );
  const channels = pagedList(
    ctx,
    (cursor) => read("/v1/alert-channels", { limit: PAGE, cursor }),
    (page) => table(["Channel", "URL", "Enabled", "", ""], channelRows(page.items, ctx), "No channels."),
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
        ["Delivery", "Channel", "Event", "State", "Attempts", "Last status", "Last error", "Made", "Delivered", "Each attempt"],
        deliveryRows(page.items, names),
        "No deliveries yet.",
      ),
  );
  const deliveriesHeading = h("h2", {}, "Deliveries");
  root.append(
    h("h1", {}, "Alerts"),
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
