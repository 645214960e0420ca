"""Definitions files loaded into validated definitions, or every problem in them named by
``file:line: document.path`` — checked with the domain's own models (``JobSpec``,
``ScheduleSpec``, the workflow's ``TaskSpec``, ``TriggerRequest``, ``HookSpec``), so a file the
server would refuse is refused before anything is changed.

A job's ``artifact`` may be a local path (relative to its file, and inside its directory or
an allowed one: ``artifact_paths``): it is hashed here, and the definition holds the sha256
the server knows it by, with the file to upload if it has not.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError

from herder.definitions.artifact_paths import OutsideAllowed, artifact_file
from herder.definitions.problems import DefinitionError, Kind, Problem, Where
from herder.definitions.source import DocumentPath, Source, read
from herder.domain.artifacts import (
    ARCHIVE_MEDIA_TYPES,
    IMAGE_ARCHIVE_MEDIA_TYPES,
    sniff_media_type,
)
from herder.domain.cron import CronError, CronExpression, parse_timezone
from herder.domain.errors import Invalid
from herder.domain.hooks import HookName, HookSpec
from herder.domain.jobs import MAX_ARTIFACT_BYTES, JobSpec, Runtime, check_job_name
from herder.domain.limits import LimitSpec, check_limit_name
from herder.domain.schedules import ScheduleSpec
from herder.domain.triggers import TriggerRequest
from herder.domain.workflows.spec import MAX_TASKS, TaskSpec, WorkflowSpec, task_order

SUFFIXES = (".yaml", ".yml")
TARGETS = ("job", "workflow")  # what a schedule starts: exactly one of them, by name
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Definition:
    """One limit, job, workflow, schedule, hook or trigger as the files declare it."""

    kind: Kind
    name: str
    fields: dict[str, Any]  # JSON values with every default filled in: what is compared
    where: Where  # the item, e.g. ``herder.yaml:7: jobs[1]``
    artifact_file: Path | None = None  # a job's local artifact, to upload unless present
    secret_from: str | None = None  # a hook's: the environment variable its secret is in


class HookDocument(HookSpec):
    """A hook as a file declares it: never its secret, at most where to read it from when the
    hook is made (the server never shows a secret again, so apply cannot compare it)."""

    name: HookName
    secret_from: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None


@dataclass(frozen=True)
class Definitions:
    items: tuple[Definition, ...]
    kinds: frozenset[Kind]  # the kinds the files manage: those they have a section for

    def of(self, kind: Kind) -> list[Definition]:
        return [item for item in self.items if item.kind is kind]


class WorkflowBody(WorkflowSpec):
    """A workflow's fields besides its name, as the workflows API takes them; its tasks left
    as they are written, to be checked one by one (each problem named by its task)."""

    tasks: Annotated[  # type: ignore[assignment]
        list[dict[str, Any]], Field(min_length=1, max_length=MAX_TASKS)
    ]


def load(paths: Sequence[Path], allowed: Sequence[Path] = ()) -> Definitions:
    """Every definition in the files (a directory: its ``*.yaml`` and ``*.yml``, sorted), or
    ``DefinitionError`` with every problem found. Local artifacts may lie under each file's
    directory and under ``allowed``."""
    problems: list[Problem] = []
    items: list[Definition] = []
    kinds: set[Kind] = set()
    for path, file in _files(paths, problems):
        source = read(path, file, allowed=tuple(allowed))
        if isinstance(source, Problem):
            problems.append(source)
            continue
        kinds |= _collect(source, items, problems)
    problems.extend(_duplicates(items))
    if problems:
        raise DefinitionError(problems)
    return Definitions(tuple(items), frozenset(kinds))


def _files(paths: Sequence[Path], problems: list[Problem]) -> list[tuple[Path, str]]:
    found: list[tuple[Path, str]] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(item for item in path.iterdir() if item.suffix in SUFFIXES)
            if not inside:
                problems.append(Problem(f"{path}: no *.yaml or *.yml file in this directory"))
            found.extend((item, str(item)) for item in inside if item.is_file())
        elif path.is_file():
            found.append((path, str(path)))
        else:
            problems.append(Problem(f"{path}: no such file or directory"))
    return found


def _collect(source: Source, items: list[Definition], problems: list[Problem]) -> set[Kind]:
    """The file's definitions into ``items``; the kinds it has a section for."""
    data = source.data
    if data is None:
        return set()
    if not isinstance(data, dict):
        problems.append(
            Problem(
                f"the file must be a mapping of {', '.join(kind.value for kind in Kind)}",
                source.where(()),
            )
        )
        return set()
    kinds: set[Kind] = set()
    for key, section in data.items():
        kind = next((kind for kind in Kind if kind.value == key), None)
        if kind is None:
            known = ", ".join(kind.value for kind in Kind)
            problems.append(
                Problem(
                    f"unknown section {key!r}; the sections are {known}", source.where((str(key),))
                )
            )
            continue
        kinds.add(kind)
        if section is None:
            continue
        if not isinstance(section, list):
            problems.append(Problem(f"{kind.value} must be a list", source.where((kind.value,))))
            continue
        for index, raw in enumerate(section):
            path: DocumentPath = (kind.value, index)
            if not isinstance(raw, dict):
                problems.append(
                    Problem(f"each of {kind.value} must be a mapping", source.where(path))
                )
                continue
            definition = _READERS[kind](source, path, raw, problems)
            if definition is not None:
                items.append(definition)
    return kinds


def _name(
    source: Source, path: DocumentPath, raw: Mapping[str, Any], problems: list[Problem]
) -> str | None:
    name = raw.get("name")
    if name is None:
        problems.append(Problem("a name is required", source.where((*path, "name"))))
        return None
    try:
        return _text(name)
    except ValueError as error:
        problems.append(Problem(str(error), source.where((*path, "name"))))
        return None


def _text(name: object) -> str:
    """A name: a string in the job-name alphabet (``2024`` unquoted is a number in YAML)."""
    if not isinstance(name, str):
        raise ValueError(f"must be a string; quote it: '{name}'")
    return check_job_name(name)


def _refused(
    source: Source, path: DocumentPath, error: ValidationError, problems: list[Problem]
) -> None:
    for item in error.errors(include_url=False):
        where = source.where((*path, *item["loc"]))
        problems.append(Problem(item["msg"].removeprefix("Value error, "), where))


def _job(
    source: Source, path: DocumentPath, raw: dict[str, Any], problems: list[Problem]
) -> Definition | None:
    name = _name(source, path, raw, problems)
    body = {key: value for key, value in raw.items() if key != "name"}
    local_file = None
    artifact = body.get("artifact")
    if isinstance(artifact, str) and not _SHA256.match(artifact):
        where = source.where((*path, "artifact"))
        try:
            local_file = artifact_file(source.directory, artifact, source.allowed)
        except OutsideAllowed as error:
            problems.append(Problem(str(error), where))
            return None
        digest = _digest(local_file, body.get("runtime"), where, problems)
        if digest is None:
            return None
        body["artifact"] = digest
    try:
        spec = JobSpec.model_validate(body)
    except ValidationError as error:
        _refused(source, path, error, problems)
        return None
    if name is None:
        return None
    return Definition(Kind.JOB, name, spec.model_dump(mode="json"), source.where(path), local_file)


def _digest(file: Path, runtime: object, where: Where, problems: list[Problem]) -> str | None:
    """The sha256 of a local artifact, refused as the server would refuse the upload."""
    try:
        if not file.is_file():
            problems.append(Problem(f"no artifact file {str(file)!r}", where))
            return None
        if file.stat().st_size > MAX_ARTIFACT_BYTES:
            problems.append(Problem(f"{file} is larger than the 10 MB an artifact may be", where))
            return None
        content = file.read_bytes()
    except OSError as error:
        problems.append(Problem(f"cannot read {file}: {error}", where))
        return None
    media_type = sniff_media_type(content[:512])
    if runtime == Runtime.ARCHIVE and media_type not in ARCHIVE_MEDIA_TYPES:
        problems.append(
            Problem(
                f"runtime archive needs a .tar.gz, .tar or .zip artifact; {file} is not one", where
            )
        )
        return None
    if runtime == Runtime.IMAGE and media_type not in IMAGE_ARCHIVE_MEDIA_TYPES:
        problems.append(Problem(f"runtime image needs an image archive; {file} is not one", where))
        return None
    return hashlib.sha256(content).hexdigest()


def _schedule(
    source: Source, path: DocumentPath, raw: dict[str, Any], problems: list[Problem]
) -> Definition | None:
    name = _name(source, path, raw, problems)
    targets = {key: raw[key] for key in TARGETS if key in raw}
    target_ok = len(targets) == 1
    if not target_ok:
        problems.append(
            Problem("name what it runs: a job or a workflow (one of them)", source.where(path))
        )
    for key, value in targets.items():
        try:
            _text(value)
        except ValueError as error:
            target_ok = False
            problems.append(Problem(str(error), source.where((*path, key))))
    paused = raw.get("paused", False)
    if not isinstance(paused, bool):
        problems.append(Problem("paused must be true or false", source.where((*path, "paused"))))
        return None
    body = {key: value for key, value in raw.items() if key not in {"name", "paused", *TARGETS}}
    try:
        spec = ScheduleSpec.model_validate(body)
    except ValidationError as error:
        _refused(source, path, error, problems)
        return None
    if not _fires(spec, source, path, problems) or name is None or not target_ok:
        return None
    fields = {key: targets.get(key) for key in TARGETS} | {"paused": paused}
    return Definition(
        Kind.SCHEDULE, name, fields | spec.model_dump(mode="json"), source.where(path)
    )


def _fires(spec: ScheduleSpec, source: Source, path: DocumentPath, problems: list[Problem]) -> bool:
    """The zone and the expression parse (seconds allowed: the server may refuse them, and it is
    asked before anything changes)."""
    try:
        parse_timezone(spec.timezone)
        CronExpression.parse(spec.cron, allow_seconds=True)
    except CronError as error:
        field = "timezone" if error.field == "timezone" else "cron"
        problems.append(Problem(error.detail, source.where((*path, field))))
        return False
    return True


def _workflow(
    source: Source, path: DocumentPath, raw: dict[str, Any], problems: list[Problem]
) -> Definition | None:
    name = _name(source, path, raw, problems)
    try:
        body = WorkflowBody.model_validate(
            {key: value for key, value in raw.items() if key != "name"}
        )
    except ValidationError as error:
        _refused(source, path, error, problems)
        return None
    tasks: list[dict[str, Any]] = []
    specs: list[TaskSpec] = []
    for index, task in enumerate(body.tasks):
        try:
            spec = TaskSpec.model_validate(task)
        except ValidationError as error:
            _refused(source, (*path, "tasks", index), error, problems)
            continue
        specs.append(spec)
        tasks.append(spec.model_dump(mode="json"))
    if len(specs) < len(body.tasks) or name is None:
        return None
    try:
        task_order(WorkflowSpec(tasks=specs, params=body.params))
    except Invalid as error:
        field_path = tuple(
            int(part) if part.isdigit() else part for part in (error.field or "").split(".")
        )
        problems.append(Problem(error.detail, source.where((*path, *field_path))))
        return None
    fields = body.model_dump(mode="json") | {"tasks": tasks}
    return Definition(Kind.WORKFLOW, name, fields, source.where(path))


def _limit(
    source: Source, path: DocumentPath, raw: dict[str, Any], problems: list[Problem]
) -> Definition | None:
    name = raw.get("name")
    try:
        if not isinstance(name, str):
            raise ValueError("a name is required, as a string")
        check_limit_name(name)
    except ValueError as error:
        problems.append(Problem(str(error), source.where((*path, "name"))))
        name = None
    try:
        spec = LimitSpec.model_validate({key: value for key, value in raw.items() if key != "name"})
    except ValidationError as error:
        _refused(source, path, error, problems)
        return None
    if name is None:
        return None
    return Definition(Kind.LIMIT, name, spec.model_dump(mode="json"), source.where(path))


def _trigger(
    source: Source, path: DocumentPath, raw: dict[str, Any], problems: list[Problem]
) -> Definition | None:
    try:
        request = TriggerRequest.model_validate(raw)
    except ValidationError as error:
        _refused(source, path, error, problems)
        return None
    fields = request.model_dump(mode="json", exclude={"name"})
    return Definition(Kind.TRIGGER, request.name, fields, source.where(path))


def _hook(
    source: Source, path: DocumentPath, raw: dict[str, Any], problems: list[Problem]
) -> Definition | None:
    if "secret" in raw:
        message = "a secret is never written in a file: name the environment variable that "
        problems.append(
            Problem(message + "holds it with secret_from", source.where((*path, "secret")))
        )
        return None
    try:
        hook = HookDocument.model_validate(raw)
    except ValidationError as error:
        _refused(source, path, error, problems)
        return None
    fields = hook.model_dump(mode="json", include=set(HookSpec.model_fields))
    fields["event"] = hook.event or hook.name  # as the server reads it back
    return Definition(
        Kind.HOOK, hook.name, fields, source.where(path), secret_from=hook.secret_from
    )


_READERS: dict[
    Kind, Callable[[Source, DocumentPath, dict[str, Any], list[Problem]], Definition | None]
] = {
    Kind.LIMIT: _limit,
    Kind.JOB: _job,
    Kind.WORKFLOW: _workflow,
    Kind.SCHEDULE: _schedule,
    Kind.HOOK: _hook,
    Kind.TRIGGER: _trigger,
}


def _duplicates(items: Sequence[Definition]) -> list[Problem]:
    first: dict[tuple[Kind, str], Where] = {}
    problems = []
    for item in items:
        key = (item.kind, item.name)
        if key in first:
            problems.append(
                Problem(
                    f"a second {item.kind.singular} named {item.name!r} "
                    f"(the first is at {first[key]})",
                    item.where,
                )
            )
        else:
            first[key] = item.where
    return problems
