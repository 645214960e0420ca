// Jobs: each with what it runs and the parameters a run of it takes; a job's page starts
// one (views/job.js). A key that may change definitions makes one here (views/job_form.js).

import { api, query } from "../api.js";
import { h, link, row, table, when } from "../dom.js";
import { creator, mineToggle, mineWanted, noneYet, pagedList } from "./common.js";
import { newJob } from "./job_form.js";

const PAGE = 50;

export function jobPath(id) {
  return `#/jobs/${encodeURIComponent(id)}`;
}

function jobRows(items) {
  return items.map((job) =>
    row(
      [
        link(jobPath(job.id), job.name),
        job.spec.runtime,
        (job.spec.parameters || []).map((parameter) => h("span", { class: "label" }, parameter.name)),
        job.version,
        when(job.updated_at),
        creator(job),
        link(`#/runs${query({ job: job.name })}`, "runs"),
      ],
      { "data-job": job.name },
    ),
  );
}

export function mount(root, route, ctx) {
  const list = pagedList(
    ctx,
    (cursor) => api(`/v1/jobs${query({ created_by: mineWanted(route.params), limit: PAGE, cursor })}`, { signal: ctx.signal }),
    (page) => table(["Job", "Runtime", "Parameters", "Version", "Updated", "Created by", ""], jobRows(page.items), noneYet("jobs", "herder job create NAME --command 'echo hello'")),
  );
  const creating = newJob(ctx);
  root.append(h("div", { class: "title-bar" }, h("h1", {}, "Jobs"), creating.button, mineToggle(route, ctx)), creating.node, list.node);
  return list;
}
