// The job page's "Notify me" (docs/alerts.md, "A job's notices"): the caller's own notices
// of the job — its runs failed, timed out, missed their deadline, an approval waits — to an
// address, a Slack incoming webhook or an alert channel by name (empty: the signed-in
// person's email); shown as they are, changed, stopped. For a key that may start runs.

import { ApiError, api } from "../api.js";
import { h } from "../dom.js";
import { editForm } from "../editor.js";

// herder.domain.alerts.notices.NoticeEvent, in its order, with what the page calls each.
export const NOTICE_EVENTS = [
  ["failed", "Failed"],
  ["timed_out", "Timed out"],
  ["deadline_missed", "Missed their deadline"],
  ["approval", "Await an approval"],
];

function said(notice) {
  if (!notice) return "You get no notices of this job.";
  const events = NOTICE_EVENTS.filter(([value]) => notice.on.includes(value)).map(([, label]) => label.toLowerCase());
  return `You are told when its runs: ${events.join(", ")} — at ${notice.to}.`;
}

// A section that reads the caller's notices once, then keeps them as saved.
export function jobNotices(jobId, ctx) {
  const node = h("section", { class: "job-notices", "aria-label": "Notify me" });
  if (!ctx.may("operator")) return node;
  const path = `/v1/jobs/${encodeURIComponent(jobId)}/notices`;
  const status = h("p", { class: "muted", "data-notices": "" }, "…");
  const stop = h("button", { type: "button", class: "secondary", hidden: true }, "Stop notices");
  let current = null;

  const form = editForm({
    label: "Notify me",
    idPrefix: "notices",
    submitText: "Save notices",
    ctx,
    fields: [
      ...NOTICE_EVENTS.map(([value, label], index) => ({
        name: `on-${value}`, label, kind: "checkbox", initial: value === "failed",
        paths: index === 0 ? ["on"] : [], // the API names the events "on"
      })),
      {
        name: "to", label: "To", placeholder: "empty: your sign-in email",
        hint: "mailto:you@example.com, a Slack incoming webhook's URL or an alert channel's name",
      },
    ],
    save: async (values) => {
      const on = NOTICE_EVENTS.map(([value]) => value).filter((value) => values[`on-${value}`]);
      const to = values.to.trim();
      const body = { on };
      // A Slack address is shown masked: unchanged, it is named by its channel.
      if (current && to === current.to && to.startsWith("https://")) body.to = `notice.${current.id}`;
      else if (to) body.to = to;
      show(await api(path, { method: "PUT", body }));
      return "Saved: " + said(current);
    },
    extra: [stop],
  });

  function show(notice) {
    current = notice;
    status.textContent = said(notice);
    stop.hidden = !notice;
    for (const [value] of NOTICE_EVENTS) {
      form.input(`on-${value}`).checked = notice ? notice.on.includes(value) : value === "failed";
    }
    form.input("to").value = notice ? notice.to : "";
  }

  stop.addEventListener("click", async () => {
    form.clear();
    try {
      await api(path, { method: "DELETE" });
      show(null);
    } catch (error) {
      form.show(error);
    }
  });

  node.append(h("h2", {}, "Notify me"), status, form.node);
  api(path, { signal: ctx.signal }).then(show, (error) => {
    if (error instanceof ApiError && error.status === 404) show(null);
    else if (error.name !== "AbortError") form.show(error);
  });
  return node;
}
