"""A workflow version made ready for deciding its runs: its tasks in dependency order, by
name, and its leaves — computed once per version, not on every task's end."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from herder.domain.workflows.spec import TaskSpec, WorkflowSpec, task_order


@dataclass(frozen=True)
class Dag:
    spec: WorkflowSpec
    order: tuple[str, ...]  # each task after its upstream tasks
    tasks: Mapping[str, TaskSpec]
    leaves: frozenset[str]  # tasks nothing depends on: they decide how a run ends

    @classmethod
    def of(cls, spec: WorkflowSpec) -> Dag:
        upstream = {parent for task in spec.tasks for parent in task.depends_on}
        return cls(
            spec=spec,
            order=tuple(task_order(spec)),
            tasks={task.name: task for task in spec.tasks},
            leaves=frozenset(task.name for task in spec.tasks if task.name not in upstream),
        )
