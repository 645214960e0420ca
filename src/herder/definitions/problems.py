"""What is wrong with a definitions file, said where: ``file:line: document.path: message``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    """The kinds a file defines, in the order they are applied (pruned in reverse): jobs,
    workflows and schedules name limits, workflows, schedules and triggers name jobs,
    schedules and triggers name workflows; hooks name nothing (their events reach triggers
    by name only)."""

    LIMIT = "limits"
    JOB = "jobs"
    WORKFLOW = "workflows"
    SCHEDULE = "schedules"
    HOOK = "hooks"
    TRIGGER = "triggers"

    @property
    def singular(self) -> str:
        return self.value.removesuffix("s")


@dataclass(frozen=True)
class Where:
    """A place in the files: the file as given, its 1-based line, the document path."""

    file: str
    line: int
    path: str  # e.g. ``jobs[2].resources.cpu``

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.path}" if self.path else f"{self.file}:{self.line}"


@dataclass(frozen=True)
class Problem:
    message: str
    where: Where | None = None  # None: about the server's state, not a place in a file

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


class DefinitionError(Exception):
    """The files cannot be applied; every problem found is listed, nothing was changed."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        super().__init__("\n".join(str(problem) for problem in problems))
        self.problems = list(problems)
