"""``herder apply`` and ``herder export``: limits, jobs, workflows, schedules, hooks and
triggers as code.

apply: load and check the files (nothing is sent if they are wrong) → read what the tenant
has → ask the server what only it can check, and the environment for new hooks' secrets →
plan → show the diff → carry it out (unless --dry-run), jobs first, deletions last. Applying
the same files again changes nothing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from herder.cli.apply_events import secret_problems
from herder.cli.apply_remote import (
    Applier,
    read_existing,
    server_problems,
)
from herder.cli.common import app, client, err, fail, out
from herder.client import ApiError
from herder.definitions.documents import load
from herder.definitions.export import document, to_yaml
from herder.definitions.plan import Action, Plan, Step, describe, plan
from herder.definitions.problems import DefinitionError, Kind, Problem

REFUSED = 2  # the exit status when nothing was changed because the files are refused

_MARKS = {
    Action.CREATE: "[green]+[/]",
    Action.UPDATE: "[yellow]~[/]",
    Action.DELETE: "[red]-[/]",
}


@app.command("apply")
def apply(
    file: Annotated[
        list[Path],
        typer.Option("-f", "--file", help="a YAML file, or a directory of them; repeatable"),
    ],
    dry_run: Annotated[bool, typer.Option(help="show what would change; change nothing")] = False,
    prune: Annotated[
        bool, typer.Option(help="delete what the files no longer name (of the kinds they have)")
    ] = False,
    allow_path: Annotated[
        list[Path] | None,
        typer.Option(
            "--allow-path",
            exists=True,
            file_okay=False,
            metavar="DIR",
            help="a directory local artifacts may also be read from (by default only the one "
            "of the file that names them); repeatable",
        ),
    ] = None,
) -> None:
    """Create or change limits, jobs, workflows, schedules, hooks and triggers to match the
    files (a new hook's secret from the variable its secret_from names, else printed once).

    Exits 2 when the files (or what the server says of them before any change) are refused:
    nothing was changed; 1 when a change fails part way."""
    try:
        definitions = load(file, allow_path or ())
    except DefinitionError as error:
        raise _refused(error.problems) from error
    with client() as herder:
        existing = read_existing(herder)
        try:
            the_plan = plan(definitions, existing, prune=prune)
        except DefinitionError as error:
            raise _refused(error.problems) from error
        problems = server_problems(herder, the_plan.changing)
        problems += secret_problems(the_plan.changing, os.environ)
        if problems:
            raise _refused(problems)
        _show(the_plan)
        if dry_run:
            out.print("dry run: nothing was changed")
        else:
            applier = Applier(herder, existing, os.environ, _say)
            _carry_out(applier, the_plan)
            if applier.uploaded:
                out.print(f"uploaded {applier.uploaded} artifact(s)")
    out.print(_summary(the_plan, done=not dry_run))


@app.command("export")
def export(
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="write here (default: print it)")
    ] = None,
) -> None:
    """Write the tenant's definitions as a file for herder apply (hooks without secrets)."""
    with client() as herder:
        existing = read_existing(herder)
    kinds = list(Kind)
    unnamed = [item.known_as for item in existing if item.name is None]
    if unnamed:
        named = ", ".join(unnamed)
        err.print(f"schedule(s) without a name written as {named}; apply knows them so")
    text = to_yaml(document(existing, kinds))
    if output is None:
        out.out(text, end="", highlight=False)
    else:
        output.write_text(text)
        err.print(f"wrote {output}")


def _refused(problems: list[Problem]) -> typer.Exit:
    for problem in problems:
        err.print(f"[bold red]error:[/] {problem}", highlight=False, markup=True, soft_wrap=True)
    return fail(f"{len(problems)} problem(s); nothing was changed", code=REFUSED)


def _show(the_plan: Plan) -> None:
    if not the_plan.changing:
        out.print("nothing to change")
    for step in the_plan.changing:
        what = f"{step.kind.singular} {step.name}"
        note = " (deleted and created again: it starts something else now)" if step.replaces else ""
        if step.kind is Kind.HOOK and step.action is Action.CREATE and step.definition:
            variable = step.definition.secret_from
            note = f" (its secret from ${variable})" if variable else " (a new secret, shown once)"
        out.print(f"{_MARKS[step.action]} {what}{note}", highlight=False)
        for change in step.changes:
            out.print(f"    {describe(change)}", highlight=False, markup=False)


def _say(text: str) -> None:
    out.print(text, highlight=False, markup=False)


def _carry_out(applier: Applier, the_plan: Plan) -> None:
    steps = the_plan.changing
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
        console=out, transient=True,
    ) as progress:  # fmt: skip
        task = progress.add_task("applying", total=len(steps))
        for done, step in enumerate(steps):
            progress.update(task, description=f"{step.action} {step.kind.singular} {step.name}")
            try:
                applier.upload(step)
                applier.apply(step)
            except ApiError as error:
                raise _failed(step, error, done) from error
            progress.advance(task)


def _failed(step: Step, error: ApiError, done: int) -> typer.Exit:
    where = step.definition.where if step.definition else f"{step.kind.singular} {step.name}"
    return fail(
        f"{where}: {error}; {done} change(s) were made before it — fix the cause and apply "
        "again: what is done already is left as it is"
    )


def _summary(the_plan: Plan, *, done: bool) -> Table:
    verbs = ("created", "updated", "deleted") if done else ("to create", "to update", "to delete")
    table = Table("KIND", *(verb.upper() for verb in verbs), "UNCHANGED")
    for kind in Kind:
        counts = [
            the_plan.count(kind, action)
            for action in (Action.CREATE, Action.UPDATE, Action.DELETE, Action.UNCHANGED)
        ]
        if any(counts):
            table.add_row(kind.value, *(str(count) for count in counts))
    return table
