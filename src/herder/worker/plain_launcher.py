"""The launcher's server at isolation none: ``sandbox.c``'s protocol (``launch_server.py``),
but an attempt is started as the worker's own user, in its workspace, a session of its own.

It exists so that what an attempt starts ends with it and is charged to it, and dies with the
worker that owns it. Each running attempt has a **keeper**: a fork of this server (made when no
keeper is free, and kept for the next attempt: no fork per attempt, no new interpreter), a
child subreaper, which starts the job. Whatever the job starts stays below its keeper however
it detaches (``setsid``, a double fork), and the keeper reaps it as it ends. When the worker
reaps the attempt (its first process exited, by itself or stopped), the keeper SIGKILLs
everything left below it, reaps it all, and answers with the job's wait status and the CPU and
peak memory of everything it reaped; then it is free for another attempt.

Where the worker gives it a parent cgroup (``--cpu-accounts DIR``: a root worker's), each
keeper moves into a cgroup of its own there, once, when it is made; what an attempt starts is
born inside, so the cgroup's CPU account across the attempt (read before the start and after
the last reap) counts every process, also those nobody waited for (a parent that ignores
SIGCHLD has its children reaped by the kernel, unseen by ``wait4``). Two reads of one file an
attempt; the keeper's own work for the attempt (a fraction of a ms) is in it too.

The server is a child subreaper too: what is below a keeper that died comes to it. A keeper
ends, killing all below it, when its channel to the server does. When the worker's socket ends
(the kernel closes it when the worker exits, even by SIGKILL), the server kills every process
below it, until none is left, and exits. Answers go out in the order of the requests; a reap
waits for its keeper without holding up the requests behind it.

Run by the worker as a script (``python -I -S plain_launcher.py [--cpu-accounts DIR]``, its
socket as standard input), it imports nothing but the standard library. Options of a start::

    --chdir DIR -- PROGRAM ARG...
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import gc
import os
import resource
import select
import selectors
import signal
import socket
import struct
import sys
from array import array
from collections import deque
from typing import NoReturn

PR_SET_CHILD_SUBREAPER = 36
DEFAULT_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ)  # Python ignores them; a program must not
REQUEST = struct.Struct("=IiII")  # as launch_server.py's; a keeper is asked alike
REPLY = struct.Struct("=iiiiqqq")  # and answers alike
MAX_DESCRIPTORS = 10
ACCOUNT_BYTES = 4096  # enough for cgroup v2's cpu.stat (its usage_usec comes first)

Request = tuple[int, int, bytes, int, list[int]]  # kind, pid, payload, options, descriptors


class Answer:
    """A reply to the worker, sent in its turn; ``reply`` is None while a keeper is asked."""

    __slots__ = ("pidfd", "reply")

    def __init__(self, reply: bytes | None, pidfd: int | None = None) -> None:
        self.reply = reply
        self.pidfd = pidfd


class Keeper:
    """The server's side of a keeper: its channel, its attempt's first pid (None: free), and
    the answer it owes."""

    __slots__ = ("asked", "channel", "job")

    def __init__(self, channel: socket.socket) -> None:
        self.channel = channel
        self.job: int | None = None
        self.asked: Answer | None = None


class Server:
    def __init__(self, worker: socket.socket, accounts: str | None = None) -> None:
        self.worker = worker
        self.accounts = accounts  # where each keeper makes its CPU account, if anywhere
        self.keepers: list[Keeper] = []
        self.running: dict[int, Keeper] = {}  # by the pid of the attempt's first process
        self.answers: deque[Answer] = deque()
        self.selector = selectors.DefaultSelector()

    def serve(self) -> None:
        """Answer requests in turn; reap orphans whenever a child has ended; return at EOF."""
        wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake the selector
        self.selector.register(self.worker, selectors.EVENT_READ)
        self.selector.register(wake_read, selectors.EVENT_READ)
        while True:
            for key, _ in self.selector.select():
                if key.fileobj is self.worker:
                    if not self.answer():
                        return
                elif key.fileobj == wake_read:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_read, 4096)
                else:
                    self.heard(key.data)
            remove_accounts(self.accounts, reap_orphans())
            self.send_answers()

    def answer(self) -> bool:
        """One request; False once the worker's socket has ended."""
        request = read_request(self.worker)
        if request is None:
            return False
        kind, pid, payload, count, fds = request
        try:
            if kind == ord("S"):
                self.start(payload, count, fds)
            elif kind == ord("R"):
                self.reap(pid)
            else:
                raise SystemExit("herder launcher: a request of an unknown kind")
            return True
        finally:
            for fd in fds:
                os.close(fd)

    def start(self, payload: bytes, count: int, fds: list[int]) -> None:
        """Hand the start to a free keeper, which starts the job and says its pid."""
        if len(fds) < 2:
            self._answer(errno.EINVAL)  # its stdout and stderr
            return
        request = REQUEST.pack(ord("S"), 0, len(payload), count) + payload
        try:
            keeper, reply = self.hand(request, fds[:2])
        except OSError as error:
            self._answer(error.errno or errno.EPIPE)
            return
        failed, pid, *_ = REPLY.unpack(reply)
        if failed:
            self._answer(failed)
            return
        try:
            pidfd = os.pidfd_open(pid)
        except OSError as error:  # no way to watch it: it must not run unwatched
            self.drop(keeper)  # which kills it
            self._answer(error.errno or errno.EINVAL)
            return
        keeper.job = pid
        self.running[pid] = keeper
        self.answers.append(Answer(REPLY.pack(0, pid, 0, 0, 0, 0, 0), pidfd))

    def hand(self, request: bytes, fds: list[int]) -> tuple[Keeper, bytes]:
        """A free keeper's reply to ``request``; a new keeper's where none is free, or where
        the free one is gone (killed: it runs as the worker's user, as jobs do)."""
        for keeper in self.keepers:
            if keeper.job is None and keeper.asked is None:
                reply = ask(keeper.channel, request, fds)
                if reply is not None:
                    return keeper, reply
                self.drop(keeper)
                break
        keeper = self.new_keeper()
        reply = ask(keeper.channel, request, fds)
        if reply is None:
            self.drop(keeper)
            raise OSError(errno.EPIPE, "a new keeper ended at once")
        return keeper, reply

    def new_keeper(self) -> Keeper:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            if os.fork() == 0:
                keep(theirs, self.accounts)
        except OSError:
            ours.close()
            raise
        finally:
            theirs.close()
        keeper = Keeper(ours)
        self.keepers.append(keeper)
        return keeper

    def drop(self, keeper: Keeper) -> None:
        """Let a keeper go: it ends, killing all below it, when its channel does."""
        self.keepers.remove(keeper)
        if keeper.job is not None:
            del self.running[keeper.job]
        keeper.channel.close()

    def reap(self, pid: int) -> None:
        """Ask the keeper of the attempt started as ``pid``; answered once it has ended."""
        keeper = self.running.get(pid)
        if keeper is None or keeper.asked is not None:
            self._answer(errno.ECHILD, pid)
            return
        keeper.asked = Answer(None)
        self.answers.append(keeper.asked)
        with contextlib.suppress(OSError):  # it was killed: its channel's end says so
            keeper.channel.sendall(REQUEST.pack(ord("R"), pid, 0, 0))
        self.selector.register(keeper.channel, selectors.EVENT_READ, keeper)

    def heard(self, keeper: Keeper) -> None:
        """A keeper's answer to a reap: once the attempt has ended, the keeper is free."""
        self.selector.unregister(keeper.channel)
        asked, pid = keeper.asked, keeper.job
        assert asked is not None
        assert pid is not None
        keeper.asked = None
        reply = receive(keeper.channel)
        if reply is None:
            self.drop(keeper)
            asked.reply = REPLY.pack(errno.EPIPE, pid, 0, 0, 0, 0, 0)
            return
        if REPLY.unpack(reply)[0] != errno.EAGAIN:
            del self.running[pid]
            keeper.job = None
        asked.reply = reply

    def _answer(self, error: int, pid: int = 0) -> None:
        self.answers.append(Answer(REPLY.pack(error, pid, 0, 0, 0, 0, 0)))

    def send_answers(self) -> None:
        """The answers whose turn it is, up to the first one still waiting for a keeper."""
        while self.answers and self.answers[0].reply is not None:
            answer = self.answers.popleft()
            assert answer.reply is not None
            rights = []
            if answer.pidfd is not None:
                rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array("i", [answer.pidfd]))]
            try:
                self.worker.sendmsg([answer.reply], rights)
            finally:
                if answer.pidfd is not None:
                    os.close(answer.pidfd)


def read_request(channel: socket.socket) -> Request | None:
    """The next request on ``channel``, its descriptors not inheritable; None at its end."""
    fds = array("i")
    header, ancillary, _, _ = channel.recvmsg(
        REQUEST.size, socket.CMSG_SPACE(MAX_DESCRIPTORS * fds.itemsize)
    )
    for level, kind, items in ancillary:
        if (level, kind) == (socket.SOL_SOCKET, socket.SCM_RIGHTS):
            fds.frombytes(items[: len(items) - len(items) % fds.itemsize])
    for fd in fds:
        os.set_inheritable(fd, False)  # a program gets only what it is given
    try:
        if not header:
            return None
        if len(header) < REQUEST.size:
            header += exactly(channel, REQUEST.size - len(header))
        kind, pid, length, count = REQUEST.unpack(header)
        return kind, pid, exactly(channel, length), count, list(fds)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def exactly(channel: socket.socket, length: int) -> bytes:
    data = b""
    while len(data) < length:
        more = channel.recv(length - len(data))
        if not more:
            raise SystemExit(0)  # the asker is gone mid-request
        data += more
    return data


def ask(channel: socket.socket, request: bytes, fds: list[int]) -> bytes | None:
    """``request`` sent to a keeper with ``fds``, and its reply; None if it is gone."""
    try:
        sent = channel.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array("i", fds))])
        channel.sendall(request[sent:])
    except OSError:
        return None
    return receive(channel)


def receive(channel: socket.socket) -> bytes | None:
    with contextlib.suppress(OSError):
        reply = channel.recv(REPLY.size, socket.MSG_WAITALL)
        if len(reply) == REPLY.size:
            return reply
    return None


def keep(channel: socket.socket, accounts: str | None) -> NoReturn:
    """A keeper's life, in a fork of the server, never to return to the server's code: it
    serves the server's requests on ``channel`` until it ends, reaping what comes to it as
    it ends. Whatever ends it, all below it is killed first."""
    try:  # SIGTERM raises SystemExit, as in the server
        wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_write)  # on SIGCHLD, as the server's
        close_all_but({channel.fileno(), wake_read, wake_write})
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise SystemExit(1)
        account = CpuAccount.enter(accounts) if accounts is not None else None
        Keeping(channel, account).serve(wake_read)
    finally:
        try:
            kill_everything_below()
        finally:
            os._exit(0)


class CpuAccount:
    """A keeper's own cgroup, under the worker's parent (cgroup v1's cpuacct hierarchy or
    v2's): what its attempts start is born inside, reaped or not. Its usage file stays open,
    read again in place (1-2 µs). The server removes the cgroup once it has reaped the
    keeper (``remove_accounts``)."""

    __slots__ = ("usage", "v1")

    def __init__(self, usage: int, *, v1: bool) -> None:
        self.usage = usage
        self.v1 = v1

    @classmethod
    def enter(cls, parent: str) -> CpuAccount | None:
        """This keeper moved into a new cgroup under ``parent``; None where it cannot be
        (its attempts are then charged what it reaped)."""
        directory = os.path.join(parent, f"keeper-{os.getpid()}")
        v1 = os.path.exists(os.path.join(parent, "cpuacct.usage"))
        try:
            os.mkdir(directory)
        except OSError:
            return None
        try:  # v1: just this thread; the keeper has no other
            write_file(os.path.join(directory, "tasks" if v1 else "cgroup.procs"), "0")
            usage = os.path.join(directory, "cpuacct.usage" if v1 else "cpu.stat")
            return cls(os.open(usage, os.O_RDONLY | os.O_CLOEXEC), v1=v1)
        except OSError:
            with contextlib.suppress(OSError):  # if it could not enter, else the server's
                os.rmdir(directory)
            return None

    def microseconds(self) -> int | None:
        """CPU time of everything that ran inside since it was made; None if unreadable."""
        try:
            text = os.pread(self.usage, ACCOUNT_BYTES, 0)
            if self.v1:
                return int(text) // 1000
            return int(text.split(b"usage_usec ", 1)[1].split(b"\n", 1)[0])
        except (OSError, ValueError, IndexError):
            return None


def write_file(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


class Usage:
    """What the processes an attempt's keeper reaped used, each with all it reaped."""

    __slots__ = ("max_rss_kb", "system_seconds", "user_seconds")

    def __init__(self) -> None:
        self.user_seconds = self.system_seconds = 0.0
        self.max_rss_kb = 0

    def add(self, usage: resource.struct_rusage) -> None:
        self.user_seconds += usage.ru_utime
        self.system_seconds += usage.ru_stime
        self.max_rss_kb = max(self.max_rss_kb, usage.ru_maxrss)


class Keeping:
    """A keeper at work: one attempt at a time, its job and everything the job started."""

    def __init__(self, channel: socket.socket, account: CpuAccount | None) -> None:
        self.channel = channel
        self.account = account
        self.job: int | None = None
        self.usage = Usage()
        self.account_at_start: int | None = None  # the account's µs when the job started

    def serve(self, wake_read: int) -> None:
        poller = select.poll()
        poller.register(self.channel, select.POLLIN)
        poller.register(wake_read, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poller.poll()}
            if wake_read in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_read, 4096)
            reap_orphans(self.job, self.usage)
            if self.channel.fileno() not in ready:
                continue
            request = read_request(self.channel)
            if request is None:
                return
            kind, pid, payload, count, fds = request
            try:
                reply = self.start(payload, count, fds) if kind == ord("S") else self.reap(pid)
            finally:
                for fd in fds:
                    os.close(fd)
            self.channel.sendall(reply)

    def start(self, payload: bytes, count: int, fds: list[int]) -> bytes:
        strings = [os.fsdecode(string) for string in payload.split(b"\0")[:-1]]
        options, env_entries = strings[:count], strings[count:]
        try:
            if len(options) < 4 or options[::2][:2] != ["--chdir", "--"] or len(fds) < 2:
                raise OSError(errno.EINVAL, "a start takes --chdir DIR -- PROGRAM ARG...")
            env = dict(entry.split("=", 1) for entry in env_entries)
            os.chdir(options[1])  # this keeper's own: the program starts where it is
            self.account_at_start = self.account.microseconds() if self.account else None
            pid = spawn(options[3:], env, fds[0], fds[1])
        except OSError as error:
            return REPLY.pack(error.errno or errno.EINVAL, 0, 0, 0, 0, 0, 0)
        except ValueError:  # an environment entry without "="
            return REPLY.pack(errno.EINVAL, 0, 0, 0, 0, 0, 0)
        self.job, self.usage = pid, Usage()
        return REPLY.pack(0, pid, 0, 0, 0, 0, 0)

    def reap(self, pid: int) -> bytes:
        """How the job ended, once it has: all it left is killed and reaped first."""
        if pid != self.job:
            return REPLY.pack(errno.ECHILD, pid, 0, 0, 0, 0, 0)
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            return REPLY.pack(errno.EAGAIN, pid, 0, 0, 0, 0, 0)
        _, status, usage = os.wait4(pid, 0)  # not before: until now its pid held its group id
        self.usage.add(usage)
        kill_everything_below(self.usage)
        os.chdir("/")  # its workspace is removed next: hold nothing of it
        self.job = None
        user, system = self.cpu_microseconds()
        return REPLY.pack(0, pid, status, 0, user, system, self.usage.max_rss_kb)

    def cpu_microseconds(self) -> tuple[int, int]:
        """The attempt's user and system CPU time: its account's, where it has one, split as
        what was reaped splits (all user where nothing reaped had used any); else what was
        reaped."""
        user, system = (
            round(seconds * 1e6) for seconds in (self.usage.user_seconds, self.usage.system_seconds)
        )
        now = self.account.microseconds() if self.account is not None else None
        if now is None or self.account_at_start is None:
            return user, system
        total = max(now - self.account_at_start, user + system)
        user_share = user / (user + system) if user + system else 1.0
        return round(total * user_share), total - round(total * user_share)


def reap_orphans(job: int | None = None, usage: Usage | None = None) -> list[int]:
    """Reap ended children, but ``job`` (it waits to be asked), adding up their ``usage``;
    return their pids."""
    reaped: list[int] = []
    while True:
        try:
            ended = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return reaped
        if ended is None or ended.si_pid == job:
            return reaped
        _, _, used = os.wait4(ended.si_pid, 0)
        reaped.append(ended.si_pid)
        if usage is not None:
            usage.add(used)


def make_accounts(accounts: str | None) -> str | None:
    """The parent of the keepers' CPU accounts, made again where an earlier server of this
    worker removed it as it ended; None if it cannot be."""
    if accounts is None:
        return None
    try:
        os.mkdir(accounts)
    except FileExistsError:
        pass
    except OSError:
        return None
    return accounts


def remove_accounts(accounts: str | None, keepers: list[int] | None = None) -> None:
    """Remove the CPU accounts of these ended ``keepers``, if they have any; None: of all,
    and their parent, as the server ends (a worker killed at once removes nothing). One
    still busy, or gone, is left to the worker."""
    if accounts is None:
        return
    with contextlib.suppress(OSError):
        names = [f"keeper-{pid}" for pid in keepers] if keepers is not None else [
            name for name in os.listdir(accounts) if name.startswith("keeper-")
        ]  # fmt: skip
        paths = [os.path.join(accounts, name) for name in names]
        for path in paths if keepers is not None else [*paths, accounts]:
            with contextlib.suppress(OSError):
                os.rmdir(path)


def close_all_but(kept: set[int]) -> None:
    """/dev/null for standard input (the worker's socket: a descriptor received must not take
    its place, as a job's stdin is opened there) and every descriptor above standard error
    closed but ``kept``: a keeper holds nothing of the server's, so that each channel of the
    server's ends with it."""
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    low = 3
    for fd in sorted(kept):
        if low < fd:
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))


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


def descendants() -> dict[int, int]:
    """Every process below this one, with its parent, from one reading of /proc."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as stat:
                    parent = int(stat.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(name))
    found: dict[int, int] = {}
    below = [os.getpid()]
    while below:
        parent = below.pop()
        for child in children.get(parent, []):
            if child not in found:
                found[child] = parent
                below.append(child)
    return found


def has_children() -> bool:
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def kill_everything_below(usage: Usage | None = None) -> None:
    """SIGKILL every descendant, round after round, until this process has no child left,
    adding up the ``usage`` of each it reaps: what a killed process had started comes to this
    subreaper once it is gone, and is found on the next round. (The rounds end when no child
    of this one could be killed: one that became another user, a setuid program, and what is
    below it are left.)"""
    me = os.getpid()
    while has_children():
        killed: list[int] = []
        for pid, parent in descendants().items():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                if parent == me:
                    killed.append(pid)
        if not killed:
            return
        for pid in killed:
            with contextlib.suppress(ChildProcessError):
                _, _, used = os.wait4(pid, 0)
                if usage is not None:
                    usage.add(used)


def main() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print(f"herder launcher: {os.strerror(ctypes.get_errno())}", file=sys.stderr)
        sys.exit(125)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # still ends what it started
    gc.freeze()  # what a keeper inherits is not collected: its pages stay shared
    worker = socket.socket(fileno=0)
    accounts = make_accounts(sys.argv[2] if sys.argv[1:2] == ["--cpu-accounts"] else None)
    try:
        Server(worker, accounts).serve()
    finally:
        kill_everything_below()
        remove_accounts(accounts)


if __name__ == "__main__":
    main()
