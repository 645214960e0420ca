"""A shell at a terminal, for tests that type lines as a person does: one ``bash`` whose
stdin, stdout and stderr are a pty of a given size that it controls, so programs see a terminal
of that width and a Ctrl-C written to it reaches the foreground command."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import signal
import struct
import subprocess
import termios
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07]*\x07|[()][0-9A-Za-z]|[=>78])")
DONE = "__terminal_line_done__"


@dataclass(frozen=True)
class Typed:
    """What a line printed (colours and carriage returns taken out) and how it ended."""

    output: str
    status: int | None  # None: still running when the test stopped waiting
    interrupted: bool  # given a Ctrl-C


def plain(output: str) -> str:
    return ANSI.sub("", output).replace("\r", "")


class Terminal:
    """The shell, fed lines one at a time through a pipe of their own (a command's stdin is
    the terminal); closed, it and all it started are ended."""

    def __init__(self, cwd: Path, environment: dict[str, str], columns: int, rows: int):
        self._master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        attributes = termios.tcgetattr(slave)
        attributes[3] &= ~termios.ECHO  # the ^C written is not output
        termios.tcsetattr(slave, termios.TCSANOW, attributes)
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
        self._typed = 0
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

    def type(self, line: str, *, seconds: float, ctrl_c: bool = False) -> Typed:
        """``line`` as typed at the prompt, waited on for ``seconds``; with ``ctrl_c``,
        interrupted as soon as it has drawn something."""
        with self._grew:
            start = len(self._output)
        self._typed += 1
        done = re.compile(rf"{DONE}{self._typed} (\d+)\n")
        self._send(f"{line}\nprintf '\\n{DONE}{self._typed} %d\\n' $?")
        if ctrl_c:
            self._wait_for(start, re.compile(r"\S"), seconds)
            os.write(self._master, b"\x03")
        finished = self._wait_for(start, done, seconds)
        output = plain(self._text_from(start))
        found = done.search(output)
        status = int(found.group(1)) if finished and found else None
        shown = output[: found.start()] if found else output
        return Typed(shown, status, interrupted=ctrl_c)

    def close(self) -> None:
        os.close(self._lines)  # the end of its script: the shell exits
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.shell.wait(10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.shell.pid, signal.SIGKILL)  # anything the tour left behind
        self.shell.wait()
        os.close(self._master)
