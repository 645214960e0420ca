// The alerts page's forms (docs/alerts.md), for a developer or admin: a channel made (a
// webhook's signing secret shown once), edited, deleted; a rule made with only its kind's
// params shown, edited (its params replaced whole), deleted. Channels and rules carry no
// ETag: an edit replaces the fields it sends.

import { ApiError, api, query } from "../api.js";
import { fill, h } from "../dom.js";
import { deleteAction, editForm, opener, section, shownOnce, words } from "../editor.js";

const CHANNEL_KINDS = ["webhook", "email", "slack"];
const ADDRESS_OF_KIND = {
  webhook: "https://hooks.example.com/herder",
  email: "mailto:ops@example.com,oncall@example.com",
  slack: "https://hooks.slack.com/services/T…/B…/…",
};

// Which params each rule kind reads: herder.domain.alerts.rules.PARAMS_OF_KIND, which the
// dashboard's tests hold this to.
export const PARAMS_OF_KIND = {
  run_failed: ["consecutive", "job_id", "outcomes"],
  schedule_missed: ["schedule_id"],
  workflow_failed: ["workflow_id"],
  queue_wait_p99: ["threshold_seconds", "window_seconds"],
  no_capacity: ["wait_seconds"],
  loop_stale: ["loop", "stale_seconds"],
  budget: ["fraction"],
  deadline_missed: ["job_id", "schedule_id", "workflow_id"],
  running_long: ["factor", "job_id", "min_seconds"],
  approval_waiting: ["after_seconds", "job_id", "workflow_id"],
};

// Each param's field; a job, schedule or workflow by its name or id.
const PARAM_FIELDS = [
  { name: "job_id", label: "Job (name or id)", hint: "empty: every job" },
  { name: "schedule_id", label: "Schedule (name or id)", hint: "empty: every schedule" },
  { name: "workflow_id", label: "Workflow (name or id)", hint: "empty: every workflow" },
  { name: "consecutive", label: "Consecutive failures", kind: "number" },
  { name: "outcomes", label: "Outcomes that count", hint: "failed, dead, timed_out" },
  { name: "threshold_seconds", label: "p99 wait above (s)", kind: "number", required: true },
  { name: "window_seconds", label: "Over a window of (s)", kind: "number" },
  { name: "wait_seconds", label: "Waiting for room (s)", kind: "number" },
  { name: "loop", label: "Loop", hint: "empty: any loop" },
  { name: "stale_seconds", label: "Lease expired for (s)", kind: "number" },
  { name: "fraction", label: "Share of a budget used", kind: "number", hint: "between 0 and 1, e.g. 0.8" },
  { name: "factor", label: "Times its p95", kind: "number" },
  { name: "min_seconds", label: "And longer than (s)", kind: "number" },
  { name: "after_seconds", label: "Waited for (s)", kind: "number" },
];
const NAMED = { job_id: "jobs", schedule_id: "schedules", workflow_id: "workflows" };
const ID_PREFIX = { job_id: "job_", schedule_id: "sch_", workflow_id: "wf_" };

// --- channels ---

export function newChannelForm(holder, ctx) {
  const form = editForm({
    label: "New channel",
    fields: [
      { name: "name", label: "Name", required: true },
      { name: "kind", label: "Kind", kind: "select", choices: CHANNEL_KINDS.map((kind) => [kind, kind]), initial: "webhook" },
      { name: "url", label: "Address", required: true, placeholder: ADDRESS_OF_KIND.webhook, hint: "a webhook's URL, mailto: recipients, or a Slack incoming webhook" },
      { name: "enabled", label: "Enabled", kind: "checkbox", initial: true },
    ],
    ctx,
    idPrefix: "new-channel",
    submitText: "Create channel",
    save: async (values) => {
      const made = await api("/v1/alert-channels", { method: "POST", body: values });
      ctx.refresh();
      if (made.secret) fill(holder, shownOnce(`Signing secret of channel ${made.name}`, made.secret));
      return `Created channel ${made.name}.`;
    },
  });
  form.input("kind").addEventListener("change", (event) => {
    form.input("url").placeholder = ADDRESS_OF_KIND[event.target.value] || "";
  });
  return section("New channel", form.node);
}

function editChannelForm(channel, ctx) {
  const form = editForm({
    label: `Edit channel ${channel.name}`,
    fields: [
      { name: "name", label: "Name", required: true, initial: channel.name },
      { name: "url", label: "Address", initial: channel.kind === "slack" ? "" : channel.url,
        hint: channel.kind === "slack" ? "the URL is kept sealed: leave empty to keep it" : `a ${channel.kind} channel's address` },
      { name: "enabled", label: "Enabled", kind: "checkbox", initial: channel.enabled },
    ],
    ctx,
    idPrefix: "edit-channel",
    save: async (values) => {
      const body = { name: values.name, enabled: values.enabled, ...(values.url.trim() ? { url: values.url } : {}) };
      const saved = await api(`/v1/alert-channels/${encodeURIComponent(channel.id)}`, { method: "PATCH", body });
      ctx.refresh();
      return `Saved channel ${saved.name}.`;
    },
  });
  return section(`Edit channel ${channel.name}`, form.node);
}

// A channel a job's notice manages (``managed_by``) changes only through that notice.
export function channelActions(channel, holder, ctx) {
  if (!ctx.may("developer") || channel.managed_by) return [];
  return [
    opener("Edit", holder, () => editChannelForm(channel, ctx)),
    deleteAction(`channel ${channel.name}`, `/v1/alert-channels/${encodeURIComponent(channel.id)}`, ctx),
  ];
}

// --- rules ---

// A job's, schedule's or workflow's id from what was typed: its id, or its name looked up
// through its list's name filter (the API reads each of them by id only).
async function idOf(param, typed) {
  if (typed.startsWith(ID_PREFIX[param])) return typed;
  const refused = new ApiError(422, `no ${NAMED[param].slice(0, -1)} ${typed}`, `params.${param}`);
  try {
    const found = await api(`/v1/${NAMED[param]}${query({ name: typed, limit: 1 })}`);
    if (found.items.length) return found.items[0].id;
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 422)) throw error; // no name of that shape
  }
  throw refused;
}

// The params the kind reads, as the fields hold them; an empty one is left to its default.
async function paramsOf(kind, values) {
  const params = {};
  for (const name of PARAMS_OF_KIND[kind] || []) {
    const value = values[name];
    if (value === null || value === "") continue;
    if (name === "outcomes") params.outcomes = words(value);
    else if (Object.hasOwn(NAMED, name)) params[name] = await idOf(name, value.trim());
    else params[name] = value;
  }
  return params;
}

// Only the chosen kind's params are shown.
function showKind(form, kind) {
  const wanted = new Set(PARAMS_OF_KIND[kind] || []);
  for (const field of PARAM_FIELDS) form.input(field.name).closest(".param").hidden = !wanted.has(field.name);
}

async function channelChoices(ctx) {
  const page = await api(`/v1/alert-channels${query({ limit: 100 })}`, { signal: ctx.signal });
  return page.items.map((channel) => [channel.id, `${channel.name} (${channel.kind})`]);
}

function ruleFields(rule, choices, names) {
  const params = rule?.params || {};
  const initial = (name) => {
    const value = params[name];
    if (Object.hasOwn(NAMED, name) && value) return names ? names.of(NAMED[name], value) : value;
    return Array.isArray(value) ? value.join(", ") : value;
  };
  return [
    { name: "name", label: "Name", required: true, initial: rule?.name },
    ...(rule ? [] : [{ name: "kind", label: "Kind", kind: "select", choices: Object.keys(PARAMS_OF_KIND).map((kind) => [kind, kind]) }]),
    ...PARAM_FIELDS.map((field) => ({ ...field, initial: initial(field.name), paths: [`params.${field.name}`] })),
    { name: "channel_ids", label: "Channels", kind: "select", multiple: true, choices, initial: rule?.channel_ids || [] },
    { name: "enabled", label: "Enabled", kind: "checkbox", initial: rule ? rule.enabled : true },
    { name: "notify_recovery", label: "Send a recovery notice", kind: "checkbox", initial: rule ? rule.notify_recovery : true },
  ];
}

export async function newRuleForm(ctx) {
  const choices = await channelChoices(ctx);
  const form = editForm({
    label: "New rule",
    fields: ruleFields(null, choices, null),
    ctx,
    idPrefix: "new-rule",
    submitText: "Create rule",
    save: async (values) => {
      const body = {
        name: values.name, kind: values.kind, params: await paramsOf(values.kind, values),
        channel_ids: values.channel_ids, enabled: values.enabled, notify_recovery: values.notify_recovery,
      };
      const made = await api("/v1/alert-rules", { method: "POST", body });
      ctx.refresh();
      return `Created rule ${made.name}.`;
    },
  });
  showKind(form, form.input("kind").value);
  form.input("kind").addEventListener("change", (event) => showKind(form, event.target.value));
  return section("New rule", choices.length ? "" : h("p", { class: "muted" }, "Make a channel first: a rule alerts through one."), form.node);
}

async function editRuleForm(rule, names, ctx) {
  const choices = await channelChoices(ctx);
  const form = editForm({
    label: `Edit rule ${rule.name}`,
    fields: ruleFields(rule, choices, names),
    ctx,
    idPrefix: "edit-rule",
    save: async (values) => {
      const body = {
        name: values.name, params: await paramsOf(rule.kind, values),
        channel_ids: values.channel_ids, enabled: values.enabled, notify_recovery: values.notify_recovery,
      };
      const saved = await api(`/v1/alert-rules/${encodeURIComponent(rule.id)}`, { method: "PATCH", body });
      ctx.refresh();
      return `Saved rule ${saved.name}.`;
    },
  });
  showKind(form, rule.kind);
  return section(`Edit rule ${rule.name} (${rule.kind})`, form.node);
}

export function ruleActions(rule, names, holder, ctx) {
  if (!ctx.may("developer")) return [];
  return [
    opener("Edit", holder, () => editRuleForm(rule, names, ctx)),
    deleteAction(`rule ${rule.name}`, `/v1/alert-rules/${encodeURIComponent(rule.id)}`, ctx),
  ];
}

// The buttons that open a new channel's or rule's form, and where the forms open.
export function consoleBar(holder, ctx) {
  if (!ctx.may("developer")) return "";
  return h("div", { class: "console-bar" },
    opener("New rule", holder, () => newRuleForm(ctx)),
    opener("New channel", holder, () => newChannelForm(holder, ctx)));
}
