"""The launcher's server, as the worker asks it: the sandbox's (``sandbox.c``, built by
``launcher.py``), or isolation none's (``plain_launcher.py``), which speak alike.

    start  the launcher's options, the environment, the attempt's stdout, stderr and further
           descriptors  →  the pid of the attempt's init (a session of its own) and a pidfd
    reap   a pid whose pidfd said it has exited  →  the job's wait status, CPU and peak memory

The worker asks over a stream socket (the server's standard input) and the server answers each
request in turn, so answers are matched to requests by their order. Asking never blocks the
worker's event loop on an answer: a start costs the server a clone into the attempt's
namespaces, and the new process's set-up competes with it for the CPU meanwhile. Nor on the
sending: what the socket cannot take yet waits in the worker and goes when it can. Both servers
write their answers blocking, and stop reading while the worker does not read them; a worker
blocked sending then could never read them, and both would wait for ever (a few hundred asks in
one turn of the loop are enough). The attempts are the server's descendants (at isolation none,
through its keepers), so their CPU shows in its tree's accounting (the children's times of
``/proc/<pid>/stat``), not the worker's.

An attempt dies with the server that started it, and the server with the worker: it ends
when it reads the end of its socket, which the kernel closes when the worker dies, however it
dies (a SIGKILL included). The sandbox's server takes every attempt's PID namespace with it
(``PR_SET_PDEATHSIG`` on each init); at isolation none ``plain_launcher.py`` kills everything
below it, being their subreaper, and each attempt's keeper kills all the attempt started when
it is reaped. A server that died is started again on the next start; what the dead one started
died with it and cannot be reaped (asking raises ``OSError``).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import signal
import socket
import struct
import subprocess
import sys
from array import array
from collections import deque
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("herder.worker")

REQUEST = struct.Struct("=IiII")  # kind, pid, payload bytes, how many strings are options
REPLY = struct.Struct("=iiiiqqq")  # errno, pid, wait status, -, user µs, system µs, max RSS kB
STOP_SECONDS = 5.0  # for the server to end once the worker has closed its socket

Answer = tuple[tuple[int, ...], int | None]  # the reply, and the descriptor that came with it


@dataclass(frozen=True)
class Reaped:
    """How an attempt's process ended: its wait status, and the CPU and peak memory of it
    and everything it waited for (at isolation none: of everything it started)."""

    status: int
    user_seconds: float
    system_seconds: float
    max_rss_kb: int


class LaunchServer:
    """One worker's launcher server, started when first asked; used from one event loop.

    ``command`` starts the server: ``sandboxing`` or ``plain`` make it.
    """

    def __init__(self, command: list[str], name: str) -> None:
        self.command = command
        self.name = name
        self._process: subprocess.Popen[bytes] | None = None
        self._socket: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiting: deque[asyncio.Future[Answer]] = deque()
        # requests (or their rest) the socket could not take yet, each with its descriptors
        # (our duplicates, for the asker's may be closed by then), in order
        self._unsent: deque[tuple[bytes, list[int]]] = deque()

    @classmethod
    def sandboxing(cls, binary: Path, skeleton: list[str]) -> LaunchServer:
        """``sandbox.c``'s server; ``skeleton``: its options of what every attempt sees alike
        (``sandbox.skeleton_options``), built once by the server when it starts."""
        return cls([str(binary), "--serve", *skeleton], "the sandbox launcher")

    @classmethod
    def plain(cls, cpu_accounts: Path | None = None) -> LaunchServer:
        """Isolation none's server (``plain_launcher.py``), in this Python, without site;
        ``cpu_accounts``: the cgroup its keepers make their CPU accounts in, if any."""
        script = Path(__file__).with_name("plain_launcher.py")
        accounts = ["--cpu-accounts", str(cpu_accounts)] if cpu_accounts is not None else []
        return cls([sys.executable, "-I", "-S", str(script), *accounts], "the launcher")

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    async def start(
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
            answer = self._ask(header, payload, [stdout, stderr, *passed])
        except BrokenPipeError:  # the server had gone before it read a word: start it again
            answer = self._ask(header, payload, [stdout, stderr, *passed])
        try:
            reply, pidfd = await asyncio.shield(answer)
        except asyncio.CancelledError:
            answer.add_done_callback(self._abandon)
            raise
        assert pidfd is not None
        return reply[1], pidfd

    async def reap(self, pid: int) -> Reaped:
        """How the attempt started as ``pid`` ended; only once its pidfd said it exited."""
        (_, _, status, _, user, system, max_rss_kb), _ = await self._ask(
            REQUEST.pack(ord("R"), pid, 0, 0), b"", []
        )
        return Reaped(status, user / 1e6, system / 1e6, max_rss_kb)

    def reap_later(self, pid: int) -> None:
        """Reap ``pid``, whose pidfd said it exited, and let go of how it ended."""
        with contextlib.suppress(OSError):
            self._ask(REQUEST.pack(ord("R"), pid, 0, 0), b"", []).add_done_callback(_ignored)

    def close(self) -> None:
        """Stop the server, and with it what it started that still runs; idempotent."""
        self._lose(OSError(errno.ESHUTDOWN, f"{self.name} was stopped"))
        if self._process is not None:
            try:
                self._process.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None

    def _ask(self, header: bytes, payload: bytes, fds: list[int]) -> asyncio.Future[Answer]:
        connection = self._connection()
        sent = 0
        if not self._unsent:  # else it goes after them
            try:  # in one call: a wake-up of the server for each part costs the worker its CPU
                sent = connection.sendmsg([header, payload], _rights(fds), socket.MSG_DONTWAIT)
            except BlockingIOError:
                pass
            except OSError as error:
                self._lose(error)  # a request half sent leaves nothing to go on with
                raise
        if sent < len(header) + len(payload):  # the descriptors go with the first byte
            self._hold((header + payload)[sent:], fds if sent == 0 else [])
        answer: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._waiting.append(answer)
        return answer

    def _hold(self, data: bytes, fds: list[int]) -> None:
        """Keep what the socket could not take, to send once it can."""
        assert self._socket is not None
        assert self._loop is not None
        if not self._unsent:
            self._loop.add_writer(self._socket, self._send_held)
        self._unsent.append((data, [os.dup(fd) for fd in fds]))

    def _send_held(self) -> None:
        """Send what was held, in order, as far as the socket takes it."""
        while self._socket is not None and self._unsent:
            data, fds = self._unsent[0]
            try:
                sent = self._socket.sendmsg([data], _rights(fds), socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            except OSError as error:
                self._lose(error)
                return
            _close_all(fds)
            if sent < len(data):
                self._unsent[0] = (data[sent:], [])
            else:
                self._unsent.popleft()
        if self._socket is not None and self._loop is not None:
            self._loop.remove_writer(self._socket)

    def _on_answers(self) -> None:
        """Hand each answer that has come to the request it answers, in order (once nothing
        is waiting, one more read can only be its end)."""
        while self._socket is not None:
            try:
                data, ancillary, _, _ = self._socket.recvmsg(
                    REPLY.size, socket.CMSG_SPACE(4), socket.MSG_DONTWAIT
                )
                if 0 < len(data) < REPLY.size:  # the rest is on its way already
                    data += self._socket.recv(REPLY.size - len(data), socket.MSG_WAITALL)
            except BlockingIOError:
                return
            except OSError as error:
                self._lose(error)
                return
            if len(data) < REPLY.size or not self._waiting:  # it ended, or answered nothing
                self._lose(OSError(errno.EPIPE, f"{self.name} stopped answering"))
                return
            received = array("i")
            for level, kind, items in ancillary:
                if (level, kind) == (socket.SOL_SOCKET, socket.SCM_RIGHTS):
                    received.frombytes(items[: len(items) - len(items) % received.itemsize])
            fd = received[0] if received else None
            answer, reply = self._waiting.popleft(), REPLY.unpack(data)
            if answer.done() or reply[0]:
                if fd is not None:
                    os.close(fd)
                if not answer.done():
                    strerror = f"{self.name}: {os.strerror(reply[0])}"
                    answer.set_exception(OSError(reply[0], strerror))
            else:
                answer.set_result((reply, fd))
            if not self._waiting:
                return

    def _abandon(self, answer: asyncio.Future[Answer]) -> None:
        """A start whose asker went away: kill what it started, and reap it once gone."""
        if answer.cancelled() or answer.exception() is not None:
            return
        (_, pid, *_), pidfd = answer.result()
        assert pidfd is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        loop = asyncio.get_running_loop()

        def gone() -> None:
            loop.remove_reader(pidfd)
            os.close(pidfd)
            self.reap_later(pid)

        loop.add_reader(pidfd, gone)

    def _lose(self, error: OSError) -> None:
        """The connection is over: what was asked fails with ``error``."""
        while self._waiting:
            answer = self._waiting.popleft()
            if not answer.done():
                answer.set_exception(error)
        while self._unsent:
            _close_all(self._unsent.popleft()[1])
        if self._socket is not None:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(self._socket)
                self._loop.remove_writer(self._socket)
            self._socket.close()  # the server ends when it reads the end of it
            self._socket = None

    def _connection(self) -> socket.socket:
        loop = asyncio.get_running_loop()
        if self._socket is not None and self._process is not None:
            if self._process.poll() is None and (self._loop is loop or not self._waiting):
                if self._loop is not loop:  # asked from another loop now (tests)
                    self._listen(loop)
                return self._socket
            if self._process.poll() is not None:
                log.error("%s exited (%s); starting it again", self.name, self._process.returncode)
        self.close()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with theirs:
            self._process = subprocess.Popen(
                self.command,
                stdin=theirs.fileno(),
                stdout=subprocess.DEVNULL,
                env={},  # nothing of the worker's, such as its token
                start_new_session=True,  # a signal to the worker's group is the worker's alone
            )
        self._socket = ours
        self._listen(loop)
        return ours

    def _listen(self, loop: asyncio.AbstractEventLoop) -> None:
        assert self._socket is not None
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._socket)
        self._loop = loop
        loop.add_reader(self._socket, self._on_answers)


def _rights(fds: list[int]) -> list[tuple[int, int, array[int]]]:
    """``fds`` as the ancillary data that passes them."""
    return [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array("i", fds))] if fds else []


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


def _ignored(answer: asyncio.Future[Answer]) -> None:
    if not answer.cancelled():
        answer.exception()  # retrieved: nobody waits for it
