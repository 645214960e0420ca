"""``herder --help`` and every command's help read as prose at 80 columns: no line break of
the source's in a paragraph, no RST ``…`` markup, and the root's commands grouped by use with
running work (run, job) first."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import typer
from rich.cells import cell_len
from typer._click import Command
from typer.core import TyperGroup
from typer.testing import CliRunner

import herder.cli  # noqa: F401 (registers every group on the root app)
from herder.cli.common import app
from herder.cli.help import PANELS

ROOT = typer.main.get_command(app)


def commands(
    command: Command, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], Command]]:
    yield path, command
    if isinstance(command, TyperGroup):
        for name, sub in command.commands.items():
            yield from commands(sub, (*path, name))


EVERY = list(commands(ROOT))
NAMES = [" ".join(path) or "herder" for path, _ in EVERY]


def texts(command: Command) -> Iterator[str]:
    yield command.help or ""
    yield command.short_help or ""
    for parameter in command.params:
        yield getattr(parameter, "help", None) or ""


@pytest.mark.parametrize(
    ("path", "command"), EVERY, ids=[" ".join(p) or "herder" for p, _ in EVERY]
)
def test_a_commands_help_is_prose_without_rst_markup(
    path: tuple[str, ...], command: Command
) -> None:
    for text in texts(command):
        assert "``" not in text, text
        assert all("\n" not in paragraph for paragraph in text.split("\n\n")), text
    shown = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert shown.exit_code == 0, shown.output
    assert "``" not in shown.output
    assert max(map(cell_len, shown.output.splitlines())) <= 80


def test_the_roots_commands_are_grouped_by_use_running_work_first() -> None:
    shown = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "80"}).output
    panels = [line.split("─")[1].strip() for line in shown.splitlines() if line.startswith("╭─")]
    assert panels == ["Options", *PANELS]  # no command left in a "Commands" panel
    names = [
        line.split()[1] for line in shown.splitlines() if line.startswith("│ ") and line[2] != " "
    ]
    assert names[1:3] == ["run", "job"]  # after --help
