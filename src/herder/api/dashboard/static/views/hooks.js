// Inbound webhooks (docs/events.md#inbound-webhooks): each hook's scheme, the event it makes
// and the address a sender posts to; a developer or admin makes one here, its signing secret
// shown once (its edit, rotation and delete: hook.js).

import { api, query } from "../api.js";
import { fill, h, link, row, table } from "../dom.js";
import { editForm, optional, section, shownOnce } from "../editor.js";
import { noneYet } from "./common.js";

const SCHEMES = ["herder", "github", "stripe"];

export const hookPath = (id) => `#/hooks/${encodeURIComponent(id)}`;

// Where a sender posts: the hook's path under this page's own address (a proxy's prefix kept).
export function inboundUrl(hook) {
  return new URL(hook.url.replace(/^\//, ""), document.baseURI).href;
}

// A hook's secret once, with the address to give the sender beside it.
export function secretOnce(hook) {
  return shownOnce(`Signing secret of hook ${hook.name}`, hook.secret,
    h("p", {}, "The sender posts to ", h("code", { class: "hook-url" }, inboundUrl(hook)), "."));
}

export function hookFields(hook = null) {
  const fields = [
    { name: "scheme", label: "Scheme", kind: "select", choices: SCHEMES.map((one) => [one, one]), initial: hook?.scheme || "herder",
      hint: "how deliveries are signed: Herder's, GitHub's or Stripe's" },
    { name: "event", label: "Event name", initial: hook?.event, hint: "empty: the hook's name (github adds the delivery's kind: github.push)" },
    { name: "rate_per_second", label: "Rate (deliveries a second)", kind: "number", initial: hook?.rate_per_second ?? 50 },
    { name: "burst", label: "Burst", kind: "number", initial: hook?.burst ?? 200 },
    { name: "enabled", label: "Enabled", kind: "checkbox", initial: hook ? hook.enabled : true },
  ];
  return hook ? fields : [
    { name: "name", label: "Name", required: true, hint: "lower case" },
    ...fields,
    { name: "secret", label: "Secret (optional)", autocomplete: "off", hint: "the sender's own, e.g. Stripe's whsec_…; empty: Herder makes one" },
  ];
}

export function hookSpec(values) {
  return {
    scheme: values.scheme,
    event: values.event.trim() ? values.event : null,
    rate_per_second: optional(values.rate_per_second),
    burst: optional(values.burst),
    enabled: values.enabled,
  };
}

function createSection(ctx) {
  const reveal = h("div");
  const form = editForm({
    label: "New hook",
    fields: hookFields(),
    ctx,
    idPrefix: "new-hook",
    submitText: "Create hook",
    save: async (values) => {
      const body = { name: values.name, ...hookSpec(values), secret: values.secret.trim() ? values.secret : undefined };
      const made = await api("/v1/hooks", { method: "POST", body });
      fill(reveal, secretOnce(made));
      form.node.reset();
      ctx.refresh();
      return `Created hook ${made.name}.`;
    },
  });
  return section("New hook", reveal, form.node);
}

export function mount(root, _route, ctx) {
  const body = h("div", { class: "list" });
  root.append(h("h1", {}, "Hooks"), h("p", { class: "muted" }, "Inbound webhooks: a sender posts signed deliveries to a hook's address, each one an event for the triggers."), body,
    ctx.may("developer") ? createSection(ctx) : "");
  return {
    async refresh() {
      const page = await api(`/v1/hooks${query({ limit: 100 })}`, { signal: ctx.signal });
      const rows = page.items.map((hook) =>
        row([link(hookPath(hook.id), hook.name), hook.scheme, h("code", {}, hook.event), h("code", { class: "hook-url" }, inboundUrl(hook)),
             `${hook.rate_per_second}/s, burst ${hook.burst}`, hook.enabled ? "enabled" : "disabled"], { "data-hook": hook.name }),
      );
      fill(body, table(["Hook", "Scheme", "Event", "Address", "Rate", "Enabled"], rows, noneYet("hooks", "herder hook create NAME --scheme github")));
    },
  };
}
