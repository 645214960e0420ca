"""The README's tour, run as a newcomer runs it: ``make up`` (on a free port, as
``make up PORT=…`` runs it), then each line of the tour as written, one after another in one
shell whose output is an 80-column terminal. A line that exits non-zero, prints a traceback or
draws a table wider than the terminal fails the test with its output; a line whose comment
says Ctrl-C is given one once it has drawn something."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import signal
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
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

pytestmark = pytest.mark.system

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
COLUMNS, ROWS = 80, 24
LINE_SECONDS = 60.0  # the slowest line waits for a run to end
DRAWN_SECONDS = 20.0  # how long a Ctrl-C line may take to draw its first picture
ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07]*\x07|[()][0-9A-Za-z]|[=>78])")
TABLE = re.compile(r"[┃│┏┡└]")
DONE = "__tour_line_done__"
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


def plain(output: str) -> str:
    return ANSI.sub("", output).replace("\r", "")


class Terminal:
    """One ``bash`` whose output is a pty of 80 by 24 it controls (so Ctrl-C reaches its
    foreground command), fed the tour's lines one at a time."""

    def __init__(self, cwd: Path, environment: dict[str, str]):
        self._master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
        attributes = termios.tcgetattr(slave)
        attributes[3] &= ~termios.ECHO  # the ^C written is not output
        termios.tcsetattr(slave, termios.TCSANOW, attributes)
        # The lines come through a pipe of their own: a command's stdin is the terminal.
        script, self._lines = os.pipe()
        self.shell = subprocess.Popen(
            # setsid --ctty: a session of its own, the pty on stdin its controlling terminal
            ["setsid", "--ctty", "bash", "--noprofile", "--norc", f"/dev/fd/{script}"],
            pass_fds=(script,), stdin=slave, stdout=slave, stderr=slave, cwd=cwd,
            env=environment,
        )  # fmt: skip
        os.close(slave)
        os.close(script)
        self._output = bytearray()
        self._grew = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        # As at a prompt: aliases work, and a Ctrl-C its foreground command handles does not
        # end the shell.
        self._send("shopt -s expand_aliases; trap : INT")

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._master, 65536)
            except OSError:  # EIO: the shell and all it started are gone
                chunk = b""
            with self._grew:
                self._output += chunk
                self._grew.notify_all()
            if not chunk:
                return

    def _send(self, text: str) -> None:
        os.write(self._lines, (text + "\n").encode())

    def _text_from(self, start: int) -> str:
        return self._output[start:].decode(errors="replace")

    def _wait_for(self, start: int, pattern: re.Pattern[str], seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        with self._grew:
            while not pattern.search(plain(self._text_from(start))):
                left = deadline - time.monotonic()
                if left <= 0 or self.shell.poll() is not None:
                    return pattern.search(plain(self._text_from(start))) is not None
                self._grew.wait(left)
            return True

    def run(self, line: str, number: int) -> Result:
        """``line`` as typed at the prompt; its output and exit status."""
        with self._grew:
            start = len(self._output)
        done = re.compile(rf"{DONE}{number} (\d+)\n")
        self._send(f"{line}\nprintf '\\n{DONE}{number} %d\\n' $?")
        interrupted = False
        if until_ctrl_c(line):
            drawn = self._wait_for(start, re.compile(r"\S"), DRAWN_SECONDS)
            time.sleep(1.0 if drawn else 0)  # a refresh or two on screen, as a person looks
            os.write(self._master, b"\x03")
            interrupted = True
        finished = self._wait_for(start, done, LINE_SECONDS)
        output = plain(self._text_from(start))
        found = done.search(output)
        status = int(found.group(1)) if finished and found else None
        return Result(line, output[: found.start()] if found else output, status, interrupted)

    def close(self) -> None:
        os.close(self._lines)  # the end of its script: the shell exits
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.shell.wait(10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.shell.pid, signal.SIGKILL)  # anything the tour left behind
        self.shell.wait()
        os.close(self._master)


@dataclass(frozen=True)
class Result:
    line: str
    output: str
    status: int | None  # None: still running after LINE_SECONDS
    interrupted: bool

    def wrong(self) -> str | None:
        """Why a newcomer would stop here, or None."""
        if self.status is None:
            return f"did not finish within {LINE_SECONDS:g}s"
        if self.status != 0:
            return f"exited {self.status}"
        if "Traceback (most recent call last)" in self.output:
            return "printed a traceback"
        lines = self.output.splitlines()
        if not self.interrupted and any(TABLE.search(line) for line in lines):
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
def checkout(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A directory as the README sees it (``.venv`` and, once up, ``.herder``), with
    ``make up PORT=…`` running there; its URL. Stopped with Ctrl-C, as the README says."""
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
        yield tmp_path, url
    finally:
        stop(up, signal.SIGINT)
        remove_what_killed_workers_left(tmp_path / ".herder")


def test_make_up_passes_a_port() -> None:
    assert make_up_command(9090)[-3:] == ["up", "--port", "9090"]


def test_the_readme_tour_runs_as_written_in_80_columns(checkout: tuple[Path, str]) -> None:
    directory, _ = checkout
    lines = tour_lines(README.read_text())
    assert lines[0].startswith("source .venv/bin/activate")
    live = [line.partition(" #")[0].strip() for line in lines if until_ctrl_c(line)]
    assert live == ["herder top"]  # the one line that runs until stopped is marked so
    terminal = Terminal(directory, outside_environment())
    try:
        for number, line in enumerate(lines):
            result = terminal.run(line, number)
            why = result.wrong()
            assert why is None, f"README tour line {number + 1}: {line}\n{why}:\n{result.output}"
            if line.startswith("herder run logs"):
                assert "Hello World!" in result.output
            if line.startswith("herder apply"):  # the export round-trips: no + ~ - lines
                changes = [row for row in result.output.splitlines() if row[:2] in CHANGES]
                assert changes == [], result.output
    finally:
        terminal.close()


def test_tour_lines_are_read_as_a_shell_reads_them() -> None:
    readme = (
        "x\n```sh\nmake up\n```\n<!-- tour: … -->\n```sh\na \\\n  b  # c\n\nd\n```\n<!-- /tour -->"
    )
    assert tour_lines(readme) == ["a    b  # c", "d"]
    assert until_ctrl_c("herder top   # live (Ctrl-C)")
    assert not until_ctrl_c("herder top --json   # for scripts")
