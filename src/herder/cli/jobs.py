"""``herder job …``: create and manage jobs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from herder.cli.answers import delete_named, print_created, print_listing
from herder.cli.common import JsonFlag, app, client, err, fail, out, pairs, print_json, when
from herder.cli.creators import CreatedByOption, creator_shown
from herder.cli.deadline_options import DeadlineCancelOption, DeadlineOption, deadline_of
from herder.cli.ids import QuietFlag, job_of, short_ids
from herder.cli.image_files import ImageArchive, image_archive
from herder.cli.parameter_options import (
    ParamEnumOption,
    ParamPatternOption,
    ParamSpecOption,
    declared_parameters,
)
from herder.cli.uploads import upload_progress
from herder.cli.views import Field, Listing, record_of
from herder.client import HerderClient
from herder.domain.images import command_warning
from herder.domain.jobs import DEFAULT_STOP_GRACE_SECONDS
from herder.domain.models import Job

job_app = typer.Typer(help="Create and manage jobs.", no_args_is_help=True)
app.add_typer(job_app, name="job")


_RUNTIME_BY_SUFFIX = {
    ".py": "python", ".zip": "archive", ".tar": "archive", ".tgz": "archive", ".gz": "archive"
}  # fmt: skip


def _file_runtime(file: Path, runtime: str | None, image: ImageArchive | None) -> str:
    """The runtime a file runs in: the one asked for, else guessed from its name; an image
    archive's is ``image`` (or ``archive``, its files unpacked, when asked), never a runtime
    that would run the archive itself as a program."""
    if image is None:
        return runtime or _RUNTIME_BY_SUFFIX.get(file.suffix, "executable")
    if runtime in (None, "image", "archive"):
        return runtime or "image"
    raise fail(
        f"{file} is an image archive ({image.layout}), not a {runtime} program: create the job "
        "with --runtime image to run it, its layers as the job's root (docs/runtimes.md)"
    )


def _job_table(jobs: list[Job], *, whole_ids: bool = False) -> Listing:
    """Jobs, each id as its shortest unique start (``whole_ids``: as it is, for one job); at
    80 columns the memory, the cores and the last update give way, in that order."""
    ids = [job.id for job in jobs]
    shown = dict(zip(ids, ids, strict=True)) if whole_ids else short_ids(ids)
    table = Listing(
        "ID", "NAME", "RUNTIME", Field("CPU", drop=2), Field("MEMORY", drop=3), "PRIORITY",
        Field("UPDATED", drop=1),
    )  # fmt: skip
    for job in jobs:
        spec = job.spec
        table.add_row(
            shown[job.id],
            job.name,
            spec.runtime,
            f"{spec.resources.cpu:g}",
            f"{spec.resources.memory_mb} MB",
            spec.priority,
            when(job.updated_at),
        )
    return table


@job_app.command("create")
def job_create(
    name: str,
    runtime: Annotated[
        str | None,
        typer.Option(help="shell, python, executable, archive or image (default: guessed)"),
    ] = None,
    command: Annotated[str | None, typer.Option(help="shell command (shell, archive)")] = None,
    file: Annotated[Path | None, typer.Option(help="program to upload (≤ 10 MB)")] = None,
    image: Annotated[
        str | None, typer.Option(help="runtime image: host/repository@sha256:… in a registry")
    ] = None,
    arg: Annotated[list[str], typer.Option(help="argument, repeatable")] = [],  # noqa: B006
    env: Annotated[list[str], typer.Option(help="KEY=VALUE, repeatable")] = [],  # noqa: B006
    label: Annotated[list[str], typer.Option(help="KEY=VALUE, repeatable")] = [],  # noqa: B006
    cpu: Annotated[float, typer.Option(help="cores (fractions allowed)")] = 1.0,
    memory_mb: Annotated[int, typer.Option(help="memory in MB")] = 256,
    gpus: Annotated[int, typer.Option()] = 0,
    disk_mb: Annotated[
        int, typer.Option(help="what it may write in all (workspace, /tmp), in MB")
    ] = 1024,
    priority: Annotated[str, typer.Option(help="high, medium or low")] = "medium",
    timeout: Annotated[int, typer.Option(help="seconds, at most 86400")] = 3600,
    stop_grace: Annotated[
        int,
        typer.Option(
            help="seconds between SIGTERM and SIGKILL when it is stopped, for it to save its "
            "work (0: kill at once; at most 600)"
        ),
    ] = DEFAULT_STOP_GRACE_SECONDS,
    max_attempts: Annotated[int, typer.Option(help="retry policy: attempts in all")] = 1,
    retry_delay: Annotated[float, typer.Option(help="first back-off cap, seconds")] = 10.0,
    network: Annotated[bool, typer.Option(help="allow network access")] = False,
    requires: Annotated[
        list[str], typer.Option(help="KEY=VALUE a worker must have as a label, repeatable")
    ] = [],  # noqa: B006
    preemptible: Annotated[
        bool, typer.Option(help="a higher-priority run may stop it (it is queued again)")
    ] = False,
    replicas: Annotated[int, typer.Option(help="a gang: members started all at once")] = 1,
    deadline: DeadlineOption = None,
    deadline_cancel: DeadlineCancelOption = False,
    param_spec: ParamSpecOption = [],  # noqa: B006
    param_enum: ParamEnumOption = [],  # noqa: B006
    param_pattern: ParamPatternOption = [],  # noqa: B006
    as_json: JsonFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Create a job. With --file the program is uploaded first."""
    parameters = declared_parameters(param_spec, param_enum, param_pattern)
    with client() as herder:
        spec: dict[str, Any] = {
            "args": arg,
            "env": pairs(env, "env"),
            "labels": pairs(label, "label"),
            "resources": {"cpu": cpu, "memory_mb": memory_mb, "gpus": gpus, "disk_mb": disk_mb},
            "priority": priority,
            "timeout_seconds": timeout,
            "stop_grace_seconds": stop_grace,
            "retry": {"max_attempts": max_attempts, "initial_delay_seconds": retry_delay},
            "network": network,
            "requires": pairs(requires, "requires"),
            "preemptible": preemptible,
            "replicas": replicas,
            "deadline": deadline_of(deadline, deadline_cancel),
            "parameters": parameters,
        }
        archived = None
        if file is not None:
            if not file.is_file():
                raise fail(f"{file} is not a file")
            archived = image_archive(file)
            runtime = _file_runtime(file, runtime, archived)
            with upload_progress(file) as progress:
                spec["artifact"] = herder.upload_artifact(file, progress=progress).id
        if image is not None:
            spec["image"] = image
            runtime = runtime or "image"
        spec["runtime"] = runtime or "shell"
        if command is not None:
            spec["command"] = command
        job = herder.create_job(name, spec)
    if spec["runtime"] == "image" and command is not None:
        warning = command_warning(archived.entrypoint if archived else None, command)
        if warning is not None:
            err.print(f"warning: {warning}", highlight=False, markup=False, soft_wrap=True)
    print_created(job, "job", as_json=as_json, quiet=quiet)


@job_app.command("list")
def job_list(
    name: Annotated[str | None, typer.Option()] = None,
    label: Annotated[list[str], typer.Option(help="KEY=VALUE filter")] = [],  # noqa: B006
    created_by: CreatedByOption = None,
    limit: int = 100,
    as_json: JsonFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """List jobs, newest first."""
    with client() as herder:
        page = herder.list_jobs(
            name=name, labels=pairs(label, "label"), created_by=created_by, limit=limit
        )
    print_listing(page, _job_table, as_json=as_json, quiet=quiet)


@job_app.command("show")
def job_show(job: str, as_json: JsonFlag = False) -> None:
    """Show a job (by name or id)."""
    with client() as herder:
        found = job_of(herder, job)
    if as_json:
        print_json(found)
    else:
        out.print(
            record_of(
                Text(f"job {found.name}", style="bold"),
                _job_table([found], whole_ids=True),
                ("created by", creator_shown(found)),
            )
        )
        out.print_json(found.spec.model_dump_json())


@job_app.command("update")
def job_update(
    job: str,
    set_: Annotated[
        list[str], typer.Option("--set", help="FIELD=JSON-VALUE, e.g. timeout_seconds=60")
    ] = [],  # noqa: B006
    param_spec: ParamSpecOption = [],  # noqa: B006
    param_enum: ParamEnumOption = [],  # noqa: B006
    param_pattern: ParamPatternOption = [],  # noqa: B006
    as_json: JsonFlag = False,
) -> None:
    """Change fields of a job; runs already submitted keep their spec. --param-spec
    replaces every parameter the job declares."""
    changes: dict[str, Any] = {}
    for field, raw in pairs(set_, "--set").items():
        try:
            changes[field] = json.loads(raw)
        except json.JSONDecodeError:
            changes[field] = raw
    if param_spec or param_enum or param_pattern:
        changes["parameters"] = declared_parameters(param_spec, param_enum, param_pattern)
    if not changes:
        raise typer.BadParameter("nothing to change", param_hint="--set, --param-spec")
    with client() as herder:
        updated = herder.update_job(job_of(herder, job).id, changes)
    if as_json:
        print_json(updated)
    else:
        out.print(f"updated job [bold]{updated.name}[/] ({updated.id})")


@job_app.command("delete")
def job_delete(job: str) -> None:
    """Delete a job definition; its run history stays."""
    delete_named(job_of, HerderClient.delete_job, job, "job")


@job_app.command("notify")
def job_notify(
    job: str,
    on: Annotated[
        str | None,
        typer.Option(help="what to be told of: failed,timed_out,deadline_missed,approval"),
    ] = None,
    to: Annotated[
        str | None,
        typer.Option(
            help="mailto:you@example.com, a Slack incoming webhook's URL or an alert channel's "
            "name (default: your email, when signed in)"
        ),
    ] = None,
    off: Annotated[bool, typer.Option("--off", help="no more notices of this job")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Be told when the job's runs fail, time out, miss their deadline or await an approval
    (yours alone; with neither --on nor --off, show what you get)."""
    if off and (on is not None or to is not None):
        raise typer.BadParameter("--off takes no --on or --to", param_hint="--off")
    if on is None and to is not None:
        raise typer.BadParameter("say what to be told of", param_hint="--on")
    with client() as herder:
        job_id = job_of(herder, job).id
        if off:
            herder.delete_job_notices(job_id)
            out.print(f"no more notices of job {job}")
            return
        if on is None:
            notice = herder.job_notices(job_id)
        else:
            events = [one.strip() for one in on.split(",") if one.strip()]
            notice = herder.set_job_notices(job_id, events, to=to)
    if as_json:
        print_json(notice)
        return
    rules = ", ".join(notice.rule_ids)
    out.print(f"notices of job {job} on {','.join(notice.on)} to {notice.to} (rules {rules})",
              highlight=False, markup=False, soft_wrap=True)  # fmt: skip
