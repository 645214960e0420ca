"""What a tenant has, written as a definitions file: only what differs from the defaults, so
the file reads like one written by hand, and applying it changes nothing."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import yaml
from pydantic import BaseModel

from herder.definitions.documents import TARGETS
from herder.definitions.plan import Existing
from herder.definitions.problems import Kind
from herder.domain.hooks import HookSpec
from herder.domain.jobs import JobSpec
from herder.domain.limits import LimitSpec
from herder.domain.schedules import ScheduleSpec
from herder.domain.triggers import TriggerSpec
from herder.domain.workflows.spec import TaskSpec

_SPECS: dict[Kind, type[BaseModel]] = {
    Kind.LIMIT: LimitSpec,
    Kind.JOB: JobSpec,
    Kind.TRIGGER: TriggerSpec,
}
_WORKFLOW_DEFAULTS: dict[str, Any] = {
    "params": {}, "max_active_runs": None, "concurrency": "queue", "deadline": None,
}  # fmt: skip


def document(existing: Sequence[Existing], kinds: Collection[Kind]) -> dict[str, Any]:
    """A section per kind in ``kinds`` (even empty: applying it with --prune manages that
    kind), items by name; an unnamed schedule by the name ``apply`` knows it by."""
    sections: dict[str, Any] = {}
    for kind in Kind:
        if kind not in kinds:
            continue
        items = sorted(
            (item for item in existing if item.kind is kind), key=lambda item: item.known_as
        )
        sections[kind.value] = [
            {"name": item.known_as, **_written(kind, item.fields, item.known_as)} for item in items
        ]
    return sections


def to_yaml(sections: dict[str, Any]) -> str:
    return yaml.safe_dump(sections, sort_keys=False, allow_unicode=True, width=100)


def _written(kind: Kind, fields: dict[str, Any], name: str) -> dict[str, Any]:
    if kind in _SPECS:
        return _SPECS[kind].model_validate(fields).model_dump(mode="json", exclude_defaults=True)
    if kind is Kind.HOOK:
        # Never a secret: the server cannot show it. An event named as the hook is the default.
        hook = HookSpec.model_validate(
            fields | {"event": None} if fields["event"] == name else fields
        )
        return hook.model_dump(mode="json", exclude_defaults=True)
    if kind is Kind.SCHEDULE:
        target = {key: fields[key] for key in TARGETS if fields.get(key) is not None}
        spec = ScheduleSpec.model_validate(
            {key: value for key, value in fields.items() if key in ScheduleSpec.model_fields}
        )
        paused = {"paused": True} if fields.get("paused") else {}
        return target | spec.model_dump(mode="json", exclude_defaults=True) | paused
    return _workflow(fields)


def _workflow(fields: dict[str, Any]) -> dict[str, Any]:
    tasks = [
        TaskSpec.model_validate(task).model_dump(mode="json", exclude_defaults=True)
        for task in fields.get("tasks", [])
    ]
    rest = {
        key: fields[key]
        for key, default in _WORKFLOW_DEFAULTS.items()
        if key in fields and fields[key] != default
    }
    return {"tasks": tasks, **rest}
