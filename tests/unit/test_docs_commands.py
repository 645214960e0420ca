"""Every ``herder …`` line the README and docs/ show names a command and options that exist:
a renamed or dropped option fails here, not in a newcomer's terminal."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer
from typer.core import TyperGroup

import herder.cli  # noqa: F401 (registers every group on the root app)
from herder.cli.common import app

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```(?:sh|bash|shell|console)?\n(.*?)```", re.S)
SPAN = re.compile(r"`(herder [^`]+)`")
CLI = typer.main.get_command(app)
BETWEEN_COMMANDS = re.compile(r"\|\s*xargs|\||&&|;|\$\(|\)")


def command_lines(text: str) -> list[str]:
    """Each ``herder …`` command of a document: in code spans and in shell blocks, split at
    pipes, ``&&`` and ``$(…)``, an environment before it dropped."""
    found = SPAN.findall(text)
    for block in BLOCK.findall(text):
        found += block.replace("\\\n", " ").splitlines()
    commands = []
    for line in found:
        for part in BETWEEN_COMMANDS.split(line.split(" #")[0]):
            words = part.split()
            while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
                words.pop(0)
            if words[:1] == ["herder"]:
                commands.append(" ".join(words))
    return commands


def unknown_in(line: str) -> str | None:
    """What of ``line`` the CLI does not have: a command, or options; None if all is there."""
    try:
        words = shlex.split(line)
    except ValueError:  # a quote the split cut in two: the words still name the options
        words = line.split()
    command = CLI
    path = ["herder"]
    rest = words[1:]
    while isinstance(command, TyperGroup) and rest and not rest[0].startswith("-"):
        found = command.get_command(typer.Context(command), rest[0])
        if found is None:
            # a placeholder (COMMAND, NAME) or an alternation (list|show) of subcommands
            names = rest[0].replace("\\|", "|").split("|")
            context = typer.Context(command)
            if rest[0].isupper() or all(command.get_command(context, name) for name in names):
                return None
            return f"no command {' '.join([*path, rest[0]])}"
        command, path, rest = found, [*path, rest[0]], rest[1:]
    options = {
        name for parameter in command.params for name in parameter.opts + parameter.secondary_opts
    }
    options.add("--help")
    missing = [
        word.split("=")[0]
        for word in rest
        if re.match(r"-{1,2}[a-z]", word) and word.split("=")[0] not in options
    ]
    return f"{' '.join(path)} has no {', '.join(missing)}" if missing else None


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_every_herder_line_names_commands_and_options_that_exist(document: Path) -> None:
    wrong = {line: unknown_in(line) for line in command_lines(document.read_text())}
    assert {line: why for line, why in wrong.items() if why} == {}


def test_a_made_up_option_or_command_is_caught() -> None:
    assert unknown_in("herder run start hello --wiat") == "herder run start has no --wiat"
    assert unknown_in("herder runs list") == "no command herder runs"
    assert unknown_in("herder top --json") is None
    assert unknown_in("herder worker list|drain NAME") is None
    block = "```sh\nHERDER_HOME=x herder run start a -q | xargs herder run cancel\n```"
    assert command_lines(block) == ["herder run start a -q", "herder run cancel"]
