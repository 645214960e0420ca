"""The diff between what the files declare and what the tenant has: what to create, change
(field by field), delete, or leave as it is. Pure: the state comes in as data.

Deletions happen only when pruning, and only of the kinds the files manage (those they have a
section for). A schedule without a name is known to the files by the name ``export`` writes
for it (``Existing.known_as``), so an exported file applies unchanged; it is never pruned. A plan
that would leave a name that is neither declared nor kept — the job or workflow a schedule, a
trigger or a workflow's task runs, a limit anything names — or a schedule's or a trigger's
values that what it starts would refuse, is refused whole, before anything changes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import ValidationError

from herder.definitions.documents import TARGETS, Definition, Definitions
from herder.definitions.problems import DefinitionError, Kind, Problem, Where
from herder.domain.errors import Invalid
from herder.domain.jobs import JobSpec
from herder.domain.limits import fielded
from herder.domain.overrides import apply_overrides
from herder.domain.schedules import ScheduleSpec


class _Absent:
    """A key one side of a change does not have (an env variable added, say)."""

    def __repr__(self) -> str:
        return "(none)"


ABSENT: Any = _Absent()
GENERATED_TAIL = 8  # characters of an unnamed schedule's id in the name ``export`` gives it


@dataclass(frozen=True)
class Existing:
    """An object the tenant has, in the shape of ``Definition.fields``."""

    kind: Kind
    name: str | None  # None: an unnamed schedule, never pruned (it may still hold a job)
    id: str
    fields: dict[str, Any]

    @property
    def known_as(self) -> str:
        """The name a file calls it by: its own, or for an unnamed schedule one made from
        what it runs and the end of its id, which neither changes while the schedule lives."""
        if self.name:
            return self.name
        target = str(self.fields.get("job") or self.fields.get("workflow") or "schedule")
        tail = re.sub(r"[^a-z0-9]", "", self.id.lower())[-GENERATED_TAIL:]
        return f"{target[: 127 - len(tail)]}-{tail}"

    @property
    def label(self) -> str:
        return repr(self.name) if self.name else f"{self.id} (unnamed)"


class Action(StrEnum):
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class Change:
    path: str  # e.g. ``resources.cpu``, ``env.DEBUG``, ``tasks[1].job``
    before: Any  # ABSENT when the key is new
    after: Any  # ABSENT when the key goes


@dataclass(frozen=True)
class Step:
    action: Action
    kind: Kind
    name: str
    definition: Definition | None = None  # None when deleting
    existing: Existing | None = None  # None when creating
    changes: tuple[Change, ...] = ()

    @property
    def replaces(self) -> bool:
        """A schedule that starts something else now: its target cannot be changed in
        place, so it is deleted and created again."""
        return self.kind is Kind.SCHEDULE and any(change.path in TARGETS for change in self.changes)


@dataclass(frozen=True)
class Plan:
    steps: tuple[Step, ...]  # in the order to apply them

    @property
    def changing(self) -> list[Step]:
        return [step for step in self.steps if step.action is not Action.UNCHANGED]

    def count(self, kind: Kind, action: Action) -> int:
        return sum(1 for step in self.steps if step.kind is kind and step.action is action)


def plan(definitions: Definitions, existing: Sequence[Existing], *, prune: bool) -> Plan:
    """Creates and changes kind by kind (in ``Kind``'s order), then, when pruning, the
    deletions in the reverse order; ``DefinitionError`` if the result would not hold."""
    problems = list(_dangling(definitions, existing, prune=prune))
    if problems:
        raise DefinitionError(problems)
    steps: list[Step] = []
    for kind in Kind:
        if kind not in definitions.kinds:
            continue
        have = {item.known_as: item for item in existing if item.kind is kind}
        for definition in definitions.of(kind):
            current = have.get(definition.name)
            steps.append(_step(definition, current))
    if prune:
        for kind in reversed(Kind):
            if kind not in definitions.kinds:
                continue
            declared = {definition.name for definition in definitions.of(kind)}
            doomed = [
                item
                for item in existing
                if item.kind is kind and item.name and item.name not in declared
            ]
            for item in sorted(doomed, key=lambda item: item.name or ""):
                steps.append(Step(Action.DELETE, kind, item.name or "", existing=item))
    return Plan(tuple(steps))


def _step(definition: Definition, current: Existing | None) -> Step:
    kind, name = definition.kind, definition.name
    if current is None:
        return Step(Action.CREATE, kind, name, definition)
    changes = tuple(diff(current.fields, definition.fields))
    action = Action.UPDATE if changes else Action.UNCHANGED
    return Step(action, kind, name, definition, current, changes)


def diff(before: Any, after: Any, path: str = "") -> Iterator[Change]:
    """Field by field: into mappings by key, into lists of named mappings (a workflow's
    tasks) by name — a task added or removed is one change — and into other lists of the same
    length by index. A field unset on one side (absent or None) and a mapping on the other is
    its fields, each set one a change; unset on both sides is no change."""
    if _unset(before) and _unset(after):
        return
    if _mapping_or_unset(before) and _mapping_or_unset(after):
        inner = list(_keyed(_as_mapping(before), _as_mapping(after), path, whole=False))
        if inner or isinstance(before, dict) == isinstance(after, dict):
            yield from inner
        else:  # unset on one side, an empty mapping on the other
            yield Change(path, before, after)
    elif (named := _named(before, after)) is not None:
        yield from _keyed(*named, path, whole=True)
    elif isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for index, (old, new) in enumerate(zip(before, after, strict=True)):
            yield from diff(old, new, f"{path}[{index}]")
    elif before != after or isinstance(before, bool) != isinstance(after, bool):
        yield Change(path, before, after)


def describe(change: Change) -> str:
    """A change as ``apply`` prints it, values as JSON without their unset fields: ``tasks.
    train.overrides.env.MODE: "a" → "b"``, ``tasks.report: added {…}``, ``tasks.lint:
    removed``."""
    if change.before is ABSENT and isinstance(change.after, dict):
        return f"{change.path}: added {_json(change.after)}"
    if change.after is ABSENT and isinstance(change.before, dict):
        return f"{change.path}: removed"
    return f"{change.path}: {_json(change.before)} → {_json(change.after)}"


def _keyed(
    before: dict[str, Any], after: dict[str, Any], path: str, *, whole: bool
) -> Iterator[Change]:
    """Key by key; with ``whole``, a key on one side only is one change of its whole value."""
    for key in [*before, *(key for key in after if key not in before)]:
        inner = f"{path}.{key}" if path else str(key)
        old, new = before.get(key, ABSENT), after.get(key, ABSENT)
        if whole and (old is ABSENT or new is ABSENT):
            yield Change(inner, old, new)
        else:
            yield from diff(old, new, inner)


def _unset(value: Any) -> bool:
    return value is ABSENT or value is None


def _mapping_or_unset(value: Any) -> bool:
    return isinstance(value, dict) or _unset(value)


def _as_mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _named(before: Any, after: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Both sides as mappings by name when both are lists of mappings each with a name of its
    own (empty lists too), else None."""
    sides = []
    for side in (before, after):
        if not isinstance(side, list):
            return None
        if not all(isinstance(item, dict) and isinstance(item.get("name"), str) for item in side):
            return None
        by_name = {item["name"]: item for item in side}
        if len(by_name) < len(side):
            return None
        sides.append(by_name)
    return sides[0], sides[1]


def _json(value: Any) -> str:
    return "(none)" if value is ABSENT else json.dumps(_without_unset(value), ensure_ascii=False)


def _without_unset(value: Any) -> Any:
    """Leaves out a mapping's None and empty fields, at every depth: what a reader would not
    have written."""
    if isinstance(value, dict):
        kept = {key: _without_unset(inner) for key, inner in value.items()}
        return {key: inner for key, inner in kept.items() if inner not in (None, {}, [])}
    if isinstance(value, list):
        return [_without_unset(item) for item in value]
    return value


@dataclass(frozen=True)
class _After:
    """An object as it will be once the plan is applied: declared, or kept as it is."""

    name: str | None
    fields: dict[str, Any]
    where: Where | None  # None: kept on the server
    label: str


def _dangling(
    definitions: Definitions, existing: Sequence[Existing], *, prune: bool
) -> Iterator[Problem]:
    """What would not hold once the plan is applied: a job, a workflow or a limit named that
    would not exist; a trigger's or a schedule's values what it starts would refuse."""
    after = {kind: _after(kind, definitions, existing, prune=prune) for kind in Kind}
    names = {kind: {item.name for item in items if item.name} for kind, items in after.items()}
    for starter in (Kind.SCHEDULE, Kind.TRIGGER):
        for item in after[starter]:
            for target, kind in (("job", Kind.JOB), ("workflow", Kind.WORKFLOW)):
                name = item.fields.get(target)
                if name is not None and name not in names[kind]:
                    yield _missing(starter.singular, item, target, kind, name, target)
    yield from _undeclared(after)
    yield from _unfit(after)
    for workflow in after[Kind.WORKFLOW]:
        for index, task in enumerate(workflow.fields.get("tasks", [])):
            job = task.get("job")  # None: a wait or an approval, which runs no job
            if job is not None and job not in names[Kind.JOB]:
                yield _missing("workflow", workflow, "job", Kind.JOB, job, f"tasks[{index}].job")
    for kind in (Kind.JOB, Kind.WORKFLOW, Kind.SCHEDULE):
        for item in after[kind]:
            for path, limit in _limits_named(kind, item.fields):
                if limit not in names[Kind.LIMIT]:
                    yield _missing(kind.singular, item, "limit", Kind.LIMIT, limit, path, "names")


def _limits_named(kind: Kind, fields: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """Each limit a job, a schedule or a workflow's task names, with the path to it."""
    owners = (
        [(f"tasks[{index}].", task) for index, task in enumerate(fields.get("tasks") or [])]
        if kind is Kind.WORKFLOW
        else [("", fields)]
    )
    for prefix, owner in owners:
        for index, reference in enumerate(owner.get("limits") or []):
            yield f"{prefix}limits[{index}].limit", reference.get("limit")


def _undeclared(after: dict[Kind, list[_After]]) -> Iterator[Problem]:
    """A trigger's parameter its job or workflow, as it will be, does not declare: the
    server refuses it (each event would)."""
    declared = {
        ("job", job.name): {
            parameter.get("name")
            for parameter in job.fields.get("parameters") or []
            if isinstance(parameter, dict)
        }
        for job in after[Kind.JOB]
    } | {
        ("workflow", workflow.name): set(workflow.fields.get("params") or {})
        for workflow in after[Kind.WORKFLOW]
    }
    for trigger in after[Kind.TRIGGER]:
        target = "job" if trigger.fields.get("job") is not None else "workflow"
        names = declared.get((target, trigger.fields.get(target)))
        if names is None or trigger.where is None:
            continue
        for name in trigger.fields.get("params") or {}:
            if name not in names:
                where = Where(
                    trigger.where.file, trigger.where.line, f"{trigger.where.path}.params.{name}"
                )
                said = f"{name!r} is not a parameter of {target} {trigger.fields.get(target)}"
                yield Problem(said, where)


def _unfit(after: dict[Kind, list[_After]]) -> Iterator[Problem]:
    """A schedule in the files its job, as it will be, would not run as it says (a required
    parameter not given, a limit's key that cannot be rendered): the check the server makes
    when the schedule is saved."""
    jobs = {job.name: job.fields for job in after[Kind.JOB]}
    for schedule in after[Kind.SCHEDULE]:
        job, where = jobs.get(schedule.fields.get("job")), schedule.where
        if where is None or job is None:
            continue
        fields = {key: schedule.fields[key] for key in ScheduleSpec.model_fields}
        spec = ScheduleSpec.model_validate(fields)
        try:
            job_spec = JobSpec.model_validate(job)
        except ValidationError:  # a job the server keeps as it is: its own to refuse
            continue
        try:
            apply_overrides(job_spec, spec.overrides, "overrides.", fielded(spec.limits))
        except Invalid as error:
            yield Problem(
                error.detail, Where(where.file, where.line, f"{where.path}.{error.field}")
            )


def _missing(
    what: str, item: _After, target: str, kind: Kind, name: Any, path: str, verb: str = "runs"
) -> Problem:
    if item.where is not None:
        where = Where(item.where.file, item.where.line, f"{item.where.path}.{path}")
        return Problem(f"no {kind.singular} named {name!r} in the files or on the server", where)
    return Problem(
        f"{what} {item.label} on the server {verb} {target} {name!r}, which --prune would "
        f"delete: keep the {target} in the files, or delete the {what} first"
    )


def _after(
    kind: Kind, definitions: Definitions, existing: Sequence[Existing], *, prune: bool
) -> list[_After]:
    managed = kind in definitions.kinds
    declared = definitions.of(kind) if managed else []
    names = {definition.name for definition in declared}
    kept = [
        item
        for item in existing
        if item.kind is kind
        and (not managed or item.name is None or (not prune and item.name not in names))
    ]
    return [
        *(_After(item.name, item.fields, item.where, repr(item.name)) for item in declared),
        *(_After(item.name, item.fields, None, item.label) for item in kept),
    ]
