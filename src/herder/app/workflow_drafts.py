"""A workflow's YAML text checked as creating it would check it, and nothing saved (the
dashboard's editor, as its text is typed: ``POST /v1/workflows/check``). First the pure
checks (``definitions/workflow_text``), then what only the store knows, read once: every job,
pool and limit it names is the tenant's (``check_jobs``, creation's own check, asked again
with each task it refused set aside, so every such task is named), and its name is free but
for the workflow being edited. Each problem at its line."""

from __future__ import annotations

from herder.definitions.workflow_text import (
    MAX_PROBLEMS,
    MAX_TEXT_BYTES,
    Draft,
    WorkflowCheck,
    check,
    path_of,
)
from herder.domain.errors import Invalid, TooLarge
from herder.domain.listings import PageRequest
from herder.store.store import Store
from herder.store.workflows.definitions import check_jobs


def check_draft(
    store: Store, tenant_id: str, text: str, workflow_id: str | None = None
) -> WorkflowCheck:
    size = len(text.encode("utf-8"))
    if size > MAX_TEXT_BYTES:
        raise TooLarge(
            f"the workflow's text is {size:,} bytes; a check reads at most {MAX_TEXT_BYTES:,}"
        )
    draft = check(text)
    if draft.spec is not None:
        _stored(store, tenant_id, draft, workflow_id)
    workflow = None
    if draft.spec is not None and draft.name is not None:
        workflow = {"name": draft.name, **draft.spec.model_dump(mode="json")}
    return WorkflowCheck(
        valid=workflow is not None,
        problems=sorted(draft.problems, key=lambda problem: problem.line),
        graph=draft.graph,
        workflow=workflow,
    )


def _stored(store: Store, tenant_id: str, draft: Draft, workflow_id: str | None) -> None:
    spec = draft.spec
    assert spec is not None
    tasks = list(spec.tasks)
    positions = list(range(len(tasks)))  # each task still asked about: its place in the text
    with store.database.read() as connection:
        for _ in range(MAX_PROBLEMS):
            try:
                check_jobs(connection, tenant_id, spec.model_copy(update={"tasks": tasks}))
                break
            except Invalid as error:
                path = path_of(error.field or "")
                if len(path) < 2 or path[0] != "tasks" or not isinstance(path[1], int):
                    draft.add_invalid(error)
                    break
                draft.add(("tasks", positions[path[1]], *path[2:]), error.detail)
                del tasks[path[1]], positions[path[1]]
                if not tasks:
                    break
    same_name = store.workflows.list(tenant_id, name=draft.name, page=PageRequest(limit=1))
    if any(workflow.id != workflow_id for workflow in same_name.items):
        draft.add(("name",), f"a workflow named {draft.name!r} already exists")
    if draft.problems:
        draft.spec = None
