"""The launcher's server at isolation none: ``sandbox.c``'s protocol (``launch_server.py``),
but an attempt is started as the worker's own user, in its workspace, a session of its own.

It exists so that an attempt's processes die with the worker that owns them. It is a child
subreaper, so whatever an attempt starts stays its descendant however it detaches (``setsid``,
a double fork). When the worker's socket ends (the kernel closes it when the worker exits, even
by SIGKILL), it kills every descendant, until none is left, and exits. It also reaps the
orphans handed to it; an attempt's own first process is reaped when the worker asks.

Run by the worker as a script (``python -I -S plain_launcher.py``, its socket as standard
input), it imports nothing but the standard library. Options of a start::

    --chdir DIR -- PROGRAM ARG...
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import selectors
import signal
import socket
import struct
import sys
from array import array
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
DEFAULT_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ)  # Python ignores them; a program must not
REQUEST = struct.Struct("=IiII")  # as launch_server.py's
REPLY = struct.Struct("=iiiiqqq")
MAX_DESCRIPTORS = 10


class Server:
    def __init__(self, worker: socket.socket) -> None:
        self.worker = worker
        self.running: set[int] = set()  # not reaped yet

    def serve(self) -> None:
        """Answer requests in turn; reap orphans whenever a child has ended; return at EOF."""
        wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake the selector
        selector = selectors.DefaultSelector()
        selector.register(self.worker, selectors.EVENT_READ)
        selector.register(wake_read, selectors.EVENT_READ)
        while True:
            for key, _ in selector.select():
                if key.fileobj is self.worker:
                    if not self.answer():
                        return
                else:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_read, 4096)
            self.reap_orphans()

    def answer(self) -> bool:
        """One request; False once the worker's socket has ended."""
        fds = array("i")
        header, ancillary, _, _ = self.worker.recvmsg(
            REQUEST.size, socket.CMSG_SPACE(MAX_DESCRIPTORS * fds.itemsize)
        )
        for level, kind, items in ancillary:
            if (level, kind) == (socket.SOL_SOCKET, socket.SCM_RIGHTS):
                fds.frombytes(items[: len(items) - len(items) % fds.itemsize])
        for fd in fds:
            os.set_inheritable(fd, False)  # a program gets only what it is given
        try:
            if not header:
                return False
            if len(header) < REQUEST.size:
                header += self._exactly(REQUEST.size - len(header))
            kind, pid, length, count = REQUEST.unpack(header)
            if kind == ord("S"):
                self.start(self._exactly(length), count, list(fds))
            elif kind == ord("R"):
                self.reap(pid)
            else:
                raise SystemExit("herder launcher: a request of an unknown kind")
            return True
        finally:
            for fd in fds:
                os.close(fd)

    def _exactly(self, length: int) -> bytes:
        data = b""
        while len(data) < length:
            more = self.worker.recv(length - len(data))
            if not more:
                raise SystemExit(0)  # the worker is gone mid-request
            data += more
        return data

    def start(self, payload: bytes, count: int, fds: list[int]) -> None:
        strings = [os.fsdecode(string) for string in payload.split(b"\0")[:-1]]
        options, env_entries = strings[:count], strings[count:]
        try:
            if len(options) < 4 or options[::2][:2] != ["--chdir", "--"] or len(fds) < 2:
                raise OSError(errno.EINVAL, "a start takes --chdir DIR -- PROGRAM ARG...")
            env = dict(entry.split("=", 1) for entry in env_entries)
            os.chdir(options[1])  # this server's own: the program starts where it is
            pid = spawn(options[3:], env, fds[0], fds[1])
        except OSError as error:
            self._reply(error.errno or errno.EINVAL)
            return
        except ValueError:  # an environment entry without "="
            self._reply(errno.EINVAL)
            return
        try:
            pidfd = os.pidfd_open(pid)
        except OSError as error:  # no way to watch it: it must not run unwatched
            os.kill(pid, signal.SIGKILL)  # and is reaped as an orphan
            self._reply(error.errno or errno.EINVAL)
            return
        self.running.add(pid)
        try:
            self._reply(0, pid, pidfd=pidfd)
        finally:
            os.close(pidfd)

    def reap(self, pid: int) -> None:
        if pid not in self.running:
            self._reply(errno.ECHILD, pid)
            return
        reaped, status, usage = os.wait4(pid, os.WNOHANG)
        if not reaped:
            self._reply(errno.EAGAIN, pid)
            return
        self.running.remove(pid)
        user, system = (round(seconds * 1e6) for seconds in (usage.ru_utime, usage.ru_stime))
        self._reply(0, pid, status, user, system, usage.ru_maxrss)

    def reap_orphans(self) -> None:
        """Reap ended children that are no attempt's first process (those wait to be asked)."""
        while True:
            try:
                ended = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if ended is None or ended.si_pid in self.running:
                return
            os.waitpid(ended.si_pid, 0)

    def _reply(
        self, error: int, pid: int = 0, status: int = 0, *usage: int, pidfd: int | None = None
    ) -> None:
        user, system, max_rss = usage or (0, 0, 0)
        reply = REPLY.pack(error, pid, status, 0, user, system, max_rss)
        rights = (
            [] if pidfd is None else [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array("i", [pidfd]))]
        )
        self.worker.sendmsg([reply], rights)


def spawn(argv: list[str], env: dict[str, str], stdout: int, stderr: int) -> int:
    """``argv`` started in a session of its own, as ``execvpe`` finds it in ``env``'s PATH,
    with /dev/null, ``stdout`` and ``stderr``; ``posix_spawn`` costs a third of ``Popen``.
    (glibc's own two real-time signals, 32 and 33, stay ignored, as after any posix_spawn.)"""
    program = argv[0]
    paths = [program] if "/" in program else [
        os.path.join(directory, program) for directory in os.get_exec_path(env)
    ]  # fmt: skip
    found = [path for path in paths if os.path.isfile(path) and os.access(path, os.X_OK)]
    if not found:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
    return os.posix_spawn(
        found[0],
        argv,
        env,
        file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, stdout, 1),
            (os.POSIX_SPAWN_DUP2, stderr, 2),
        ],
        setsid=True,
        setsigdef=DEFAULT_SIGNALS,
    )


def descendants() -> set[int]:
    """Every process below this one, from one reading of /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found: set[int] = set()
    below = [os.getpid()]
    while below:
        for child in children.get(below.pop(), []):
            if child not in found:
                found.add(child)
                below.append(child)
    return found


def kill_everything_below() -> None:
    """SIGKILL every descendant until none is left: what a killed process had started comes
    to this subreaper once it is gone, and is found on the next round. (One that may not be
    killed, a setuid program's, ends the rounds.)"""
    while found := descendants():
        killed = False
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed = True
        if not killed:
            return
        try:
            os.waitpid(-1, 0)  # one of them ended; reap the rest that have
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass


def main() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print(f"herder launcher: {os.strerror(ctypes.get_errno())}", file=sys.stderr)
        sys.exit(125)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # still ends what it started
    worker = socket.socket(fileno=0)
    try:
        Server(worker).serve()
    finally:
        kill_everything_below()


if __name__ == "__main__":
    main()
