// Jobs: each with what it runs and the parameters a run of it takes; a job's page starts
// one (views/job.js).

import { api, query } from "../api.js";
import { h, link, row, table, when } from "../dom.js";
import { noneYet, pagedList } from "./common.js";

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
        link(`#/runs${query({ job: job.name })}`, "runs"),
      ],
      { "data-job": job.name },
    ),
  );
}

export function mount(root, _route, ctx) {
  const list = pagedList(
    ctx,
    (cursor) => api(`/v1/jobs${query({ limit: PAGE, cursor })}`, { signal: ctx.signal }),
    (page) => table(["Job", "Runtime", "Parameters", "Version", "Updated", ""], jobRows(page.items), noneYet("jobs", "herder job create NAME --command 'echo hello'")),
  );
  root.append(h("h1", {}, "Jobs"), list.node);
  return list;
}
