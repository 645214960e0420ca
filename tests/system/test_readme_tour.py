"""The README's tour, run as a newcomer runs it: ``make up`` (on a free port, as
``make up PORT=…`` runs it), then each line of the tour as written, one after another in one
shell whose output is an 80-column terminal. A line that exits non-zero, prints a traceback or
draws a table wider than the terminal fails the test with its output; a line whose comment
says Ctrl-C is given one once it has drawn something."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from herder.client import HerderClient
from tests.system.conftest import (
    free_port,
    remove_what_killed_workers_left,
    stop,
    wait_healthy,
    wait_until,
)
from tests.system.terminal import Terminal, Typed

pytestmark = pytest.mark.system

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
COLUMNS, ROWS = 80, 24
LINE_SECONDS = 60.0  # the slowest line waits for a run to end
TABLE = re.compile(r"[┃│┏┡└]")
CHANGES = ("+ ", "~ ", "- ")  # how apply marks what it would create, change, delete


def tour_lines(readme: str) -> list[str]:
    """The commands between ``<!-- tour`` and ``<!-- /tour -->``: each line of their shell
    blocks, a line ending in a backslash joined with the next, as a shell reads them."""
    section = readme.split("<!-- tour", 1)[1].split("<!-- /tour -->", 1)[0]
    lines: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", section, re.S):
        lines += [line for line in block.replace("\\\n", " ").splitlines() if line.strip()]
    return lines


def until_ctrl_c(line: str) -> bool:
    return "Ctrl-C" in line.partition(" #")[2]


def make_up_command(port: int) -> list[str]:
    """What ``make up PORT=port`` runs once its .venv is there (``make -n``: the command,
    without the installing it would do first on a fresh clone)."""
    planned = subprocess.run(
        ["make", "--no-print-directory", "-n", "-C", str(ROOT), "up", f"PORT={port}"],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    (command,) = [line for line in planned if "herder up" in line]
    return command.split()


def wrong(typed: Typed) -> str | None:
    """Why a newcomer would stop at a line that printed this, or None."""
    if typed.status is None:
        return f"did not finish within {LINE_SECONDS:g}s"
    if typed.status != 0:
        return f"exited {typed.status}"
    if "Traceback (most recent call last)" in typed.output:
        return "printed a traceback"
    lines = typed.output.splitlines()
    if not typed.interrupted and any(TABLE.search(line) for line in lines):
        wide = [line for line in lines if len(line.rstrip()) > COLUMNS]
        if wide:
            return f"drew {len(wide)} line(s) wider than {COLUMNS} columns"
    return None


def outside_environment() -> dict[str, str]:
    """The caller's environment without Herder's settings: the tour relies on its defaults
    (./.herder, ./.herder/client.json), as a newcomer's shell does."""
    kept = {key: value for key, value in os.environ.items() if not key.startswith("HERDER_")}
    return kept | {"TERM": "xterm-256color", "PYTHONUNBUFFERED": "1"}


@pytest.fixture
def checkout(tmp_path: Path) -> Iterator[Path]:
    """A directory as the README sees it (``.venv`` and, once up, ``.herder``), with
    ``make up PORT=…`` running there. Stopped with Ctrl-C, as the README says."""
    if not (ROOT / ".venv" / "bin" / "herder").exists():
        pytest.skip("no .venv with herder in the checkout: make up (or make test) makes it")
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    port = free_port()
    up = subprocess.Popen(
        make_up_command(port), cwd=tmp_path, env=outside_environment(), start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, up)
        key = json.loads((tmp_path / ".herder" / "client.json").read_text())["api_key"]
        with HerderClient(url, key) as herder:  # its local worker too, as a person waits
            wait_until(lambda: bool(herder.list_workers()), 60, "herder up's worker registered")
        yield tmp_path
    finally:
        stop(up, signal.SIGINT)
        remove_what_killed_workers_left(tmp_path / ".herder")


def test_make_up_passes_a_port() -> None:
    assert make_up_command(9090)[-3:] == ["up", "--port", "9090"]


def test_the_readme_tour_runs_as_written_in_80_columns(checkout: Path) -> None:
    terminal = Terminal(checkout, outside_environment(), COLUMNS, ROWS)
    try:
        for number, line in enumerate(tour_lines(README.read_text()), start=1):
            typed = terminal.type(line, seconds=LINE_SECONDS, ctrl_c=until_ctrl_c(line))
            why = wrong(typed)
            assert why is None, f"README tour line {number}: {line}\n{why}:\n{typed.output}"
            if line.startswith("herder run logs"):
                assert "Hello World!" in typed.output
            if line.startswith("herder apply"):  # the export round-trips: no + ~ - lines
                changes = [row for row in typed.output.splitlines() if row[:2] in CHANGES]
                assert changes == [], typed.output
    finally:
        terminal.close()


def test_tour_lines_are_read_as_a_shell_reads_them() -> None:
    readme = (
        "x\n```sh\nmake up\n```\n<!-- tour: … -->\n```sh\na \\\n  b  # c\n\nd\n```\n<!-- /tour -->"
    )
    assert tour_lines(readme) == ["a    b  # c", "d"]
    assert until_ctrl_c("herder top   # live (Ctrl-C)")
    assert not until_ctrl_c("herder top --json   # for scripts")
