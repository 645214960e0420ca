"""Who made an object, as people read it: the actors kept in ``created_by`` (and the audit
log's) named at read time, so a key renamed, or a person's name changed at their provider,
shows as it is now. One query for a whole page."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

from herder.domain.audit import AuditEntry
from herder.domain.models import Job, Page, Run, RunDetail, Schedule
from herder.domain.workflows.models import Workflow, WorkflowRun, WorkflowRunDetail
from herder.store.actors import people_names
from herder.store.store import Store

Created = TypeVar(
    "Created", Job, Run, RunDetail, Schedule, Workflow, WorkflowRun, WorkflowRunDetail
)


def display_names(store: Store, tenant_id: str, actors: Iterable[str | None]) -> dict[str, str]:
    """Each of these actors that is one of the tenant's people (a key, a signed-in person)
    by their name; the system's actors (``schedule:…``, ``event:…``) and unknown ones have
    none."""
    wanted = {actor for actor in actors if actor}
    if not wanted:
        return {}
    with store.database.read() as connection:
        return people_names(connection, tenant_id, wanted)


def with_creator_names(store: Store, tenant_id: str, items: Sequence[Created]) -> list[Created]:
    """``items`` with ``created_by_name`` filled where their creator is a person."""
    names = display_names(store, tenant_id, (item.created_by for item in items))
    return [
        item.model_copy(update={"created_by_name": names[item.created_by]})
        if item.created_by in names
        else item
        for item in items
    ]


def with_creator_name(store: Store, tenant_id: str, item: Created) -> Created:
    (named,) = with_creator_names(store, tenant_id, [item])
    return named


def page_with_creator_names(store: Store, tenant_id: str, page: Page[Created]) -> Page[Created]:
    return Page(
        items=with_creator_names(store, tenant_id, page.items), next_cursor=page.next_cursor
    )


def audit_with_names(store: Store, tenant_id: str, page: Page[AuditEntry]) -> Page[AuditEntry]:
    """The log's entries with each caller named as people know them now (``actor_name``)."""
    names = display_names(store, tenant_id, (entry.actor for entry in page.items))
    items = [
        entry.model_copy(update={"actor_name": names.get(entry.actor) or entry.key_name})
        for entry in page.items
    ]
    return Page(items=items, next_cursor=page.next_cursor)
