"""The sandbox launcher: built once per worker host from ``sandbox.c``, then run as a server.

The launcher must be a small native program: it sets up namespaces, mounts, the uid switch and
the seccomp filter, where a chain of util-linux tools costs three execs (DESIGN §9). It is
compiled from the source shipped in this package with the host's C compiler into a root-owned
directory, named after the hash of its source and flags, so an upgrade builds a new one and a
job can never replace it. It is linked statically where the host has a static libc.

Each worker runs it once, as a server (``LaunchServer``): an attempt then costs one ``clone``
of a small process instead of an exec (about 0.35 ms of CPU here, most of it libc's start-up
asking the CPU what it is, which traps in a VM) and a fork of the worker's own.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import shutil
import socket
import struct
import subprocess
from array import array
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from herder.domain.errors import HerderError

log = logging.getLogger("herder.worker")

REQUEST = struct.Struct("=IiII")  # kind, pid, payload bytes, how many strings are options
REPLY = struct.Struct("=iiiiqqq")  # errno, pid, wait status, -, user µs, system µs, max RSS kB
STOP_SECONDS = 5.0  # for the server to end once the worker has closed its socket

COMPILE_FLAGS = [
    "-O2",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-D_FORTIFY_SOURCE=2",
    "-fstack-protector-strong",
]


class LauncherUnavailable(HerderError):
    """The sandbox launcher could not be built on this host; the message says why."""


def sandbox_source() -> bytes:
    return resources.files("herder.worker").joinpath("sandbox.c").read_bytes()


def sandbox_launcher(bin_directory: Path) -> Path:
    """The launcher for this version of the source, built into ``bin_directory`` (root-owned,
    made by ``statedir.secure_directory``) when it is not there yet."""
    source = sandbox_source()
    recipe = hashlib.sha256(source + " ".join(COMPILE_FLAGS).encode()).hexdigest()[:16]
    target = bin_directory / f"herder-sandbox-{recipe}"
    if target.is_file() and not target.is_symlink():
        return target
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise LauncherUnavailable(
            "a root worker sandboxes every attempt with herder-sandbox, built once from source "
            "with the host's C compiler; install one (apt-get install gcc) or run a trusted "
            "fleet's worker with --isolation none"
        )
    source_file = bin_directory / f".{target.name}.c"
    partial = bin_directory / f".{target.name}.{os.getpid()}"
    source_file.write_bytes(source)
    try:
        for linking in (["-static"], []):  # static execs faster; libc.a may be missing
            built = subprocess.run(
                [compiler, *COMPILE_FLAGS, *linking, "-o", str(partial), str(source_file)],
                capture_output=True,
                text=True,
                check=False,
            )
            if built.returncode == 0:
                break
        if built.returncode != 0:
            raise LauncherUnavailable(f"building herder-sandbox failed:\n{built.stderr}")
        partial.chmod(0o755)
        partial.rename(target)  # atomic: two workers starting together both end with one
    finally:
        source_file.unlink(missing_ok=True)
        partial.unlink(missing_ok=True)
    return target


@dataclass(frozen=True)
class Reaped:
    """How an attempt's process ended: its wait status, and the CPU and peak memory of it
    and everything it waited for."""

    status: int
    user_seconds: float
    system_seconds: float
    max_rss_kb: int


class LaunchServer:
    """The launcher, run once per worker as a server that starts attempts (``sandbox.c``).

    Starting an attempt costs the server a ``clone`` into the attempt's namespaces; no exec,
    and no fork of the worker's own large process. The worker asks over a socket (the
    server's standard input): *start* (the launcher's options, the environment, the
    attempt's stdout and stderr and further descriptors) answers the attempt's pid and a
    pidfd; *reap*, once the pidfd says it has exited, answers how it ended. Attempts are the
    server's children, so their CPU shows in the server's own accounting, not the worker's.

    Used from one thread (the agent's event loop: each request is answered at once). A
    server that died is started again on the next start; what it had started cannot be reaped.
    """

    def __init__(self, binary: Path) -> None:
        self.binary = binary
        self._process: subprocess.Popen[bytes] | None = None
        self._socket: socket.socket | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(
        self,
        options: list[str],
        env: dict[str, str],
        stdout: int,
        stderr: int,
        passed: tuple[int, ...] = (),
    ) -> tuple[int, int]:
        """Start an attempt: its pid and a pidfd. ``passed`` become its descriptors 3, 4, …"""
        strings = [*options, *(f"{key}={value}" for key, value in env.items())]
        encoded = [os.fsencode(string) for string in strings]
        if any(b"\0" in string for string in encoded):
            raise OSError(errno.EINVAL, "an option or environment entry holds a NUL byte")
        payload = b"".join(string + b"\0" for string in encoded)
        header = REQUEST.pack(ord("S"), 0, len(payload), len(options))
        try:
            reply, fds = self._ask(header, payload, [stdout, stderr, *passed])
        except BrokenPipeError:  # the server had gone before it read a word: start it again
            reply, fds = self._ask(header, payload, [stdout, stderr, *passed])
        return reply[1], fds[0]

    def reap(self, pid: int) -> Reaped:
        """How the attempt started as ``pid`` ended; only once its pidfd said it exited."""
        (_, _, status, _, user, system, max_rss_kb), _ = self._ask(
            REQUEST.pack(ord("R"), pid, 0, 0), b"", []
        )
        return Reaped(status, user / 1e6, system / 1e6, max_rss_kb)

    def close(self) -> None:
        """Stop the server (attempts it started run on); idempotent."""
        if self._socket is not None:
            self._socket.close()  # the server ends when it reads the end of it
            self._socket = None
        if self._process is not None:
            try:
                self._process.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None

    def _ask(
        self, header: bytes, payload: bytes, fds: list[int]
    ) -> tuple[tuple[int, ...], list[int]]:
        connection = self._connection()
        try:
            connection.sendmsg([header], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array("i", fds))])
            connection.sendall(payload)
            data, ancillary, _, _ = connection.recvmsg(REPLY.size, socket.CMSG_SPACE(4))
            while len(data) < REPLY.size and (more := connection.recv(REPLY.size - len(data))):
                data += more
        except OSError:
            self.close()  # a request half sent or answered leaves nothing to go on with
            raise
        received = array("i")
        for level, kind, items in ancillary:
            if (level, kind) == (socket.SOL_SOCKET, socket.SCM_RIGHTS):
                received.frombytes(items[: len(items) - len(items) % received.itemsize])
        if len(data) < REPLY.size:
            self.close()
            raise OSError(errno.EPIPE, "the sandbox launcher stopped answering")
        reply = REPLY.unpack(data)
        if reply[0]:
            raise OSError(reply[0], f"the sandbox launcher: {os.strerror(reply[0])}")
        return reply, list(received)

    def _connection(self) -> socket.socket:
        if self._socket is not None and self._process is not None:
            if self._process.poll() is None:
                return self._socket
            log.error(
                "the sandbox launcher exited (%s); starting it again", self._process.returncode
            )
            self.close()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with theirs:
            self._process = subprocess.Popen(
                [str(self.binary), "--serve"],
                stdin=theirs.fileno(),
                stdout=subprocess.DEVNULL,
                env={},  # nothing of the worker's, such as its token
                start_new_session=True,  # a signal to the worker's group is the worker's alone
            )
        self._socket = ours
        return ours
