"""A hostile tenant's jobs against a real root worker: each attack of issue 9, contained.

One ``herder up`` (server and sandboxing worker, real processes) serves the whole module;
every test submits the jobs an attacker would and checks what they could reach.
"""

from __future__ import annotations

import os
import shlex
import socket
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from herder.client import HerderClient
from herder.domain.retry import DISK_FULL_REASON_PREFIX
from tests.images import BUSYBOX, Member, busybox_image
from tests.system.conftest import herder_up, processes_matching
from tests.system.outside import ECHO_PORT, OUTSIDE, PRIVATE

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(os.geteuid() != 0, reason="only a root worker sandboxes its attempts"),
]


# the busybox image, with a set-uid copy of busybox (as id) that unpacking must make plain
ATTACK_IMAGE = busybox_image(extra=[Member("opt/setuid/id", BUSYBOX.read_bytes(), mode=0o4755)])


class Herder:
    """The running system, and a way to run a job in it as a tenant would."""

    def __init__(self, home: Path, url: str, client: HerderClient) -> None:
        self.home = home
        self.url = url
        self.client = client
        self._image_artifact: str | None = None

    @property
    def worker_token(self) -> str:
        return (self.home / "worker-token").read_text().strip()

    def run(self, command: str, **spec: Any) -> tuple[Any, str]:
        """Run ``command`` as a shell job to its end: the run and everything it printed."""
        return self.run_spec({"runtime": "shell", "command": command, **spec})

    def run_spec(self, spec: dict[str, Any]) -> tuple[Any, str]:
        name = f"attack-{uuid.uuid4().hex[:10]}"
        job = self.client.create_job(name, spec)
        run = self.client.wait(self.client.start_run(job.id).id, timeout=60)
        output = "".join(chunk.text for chunk in self.client.logs(run.id).chunks)
        return run, output

    def in_image(self, script: str, **spec: Any) -> tuple[Any, str]:
        """Run ``script`` as a runtime image job in the busybox image (``ATTACK_IMAGE``)."""
        if self._image_artifact is None:
            path = self.home.parent / "attack-image.tar"
            path.write_bytes(ATTACK_IMAGE.oci_archive())
            self._image_artifact = self.client.upload_artifact(path).id
        command = shlex.quote(script)  # the image's entrypoint is sh -c
        return self.run_spec(
            {"runtime": "image", "artifact": self._image_artifact, "command": command, **spec}
        )

    def python(self, source: str, **spec: Any) -> tuple[Any, str]:
        script = textwrap.dedent(source).replace("'", "'\"'\"'")
        return self.run(f"python3 -c '{script}'", **spec)


@pytest.fixture(scope="module")
def herder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Herder]:
    home = tmp_path_factory.mktemp("attacked") / "home"
    with herder_up(home) as (_, url, client):
        yield Herder(home, url, client)


def test_a_job_sees_only_its_own_processes_and_never_the_worker_token(herder: Herder) -> None:
    run, output = herder.run(
        "ls /proc | grep -cE '^[0-9]+$'; cat /proc/[0-9]*/cmdline /proc/[0-9]*/environ; true"
    )
    assert run.state == "succeeded", run.reason
    processes = int(output.splitlines()[0])
    assert processes <= 5, output  # its launcher's init, its shell, ls, grep (and cat's turn)
    assert herder.worker_token not in output


def test_host_sockets_are_out_of_reach_without_network(herder: Herder) -> None:
    run, output = herder.python(
        """
        import os, socket
        print("run:", sorted(os.listdir("/run")), "var/run:", sorted(os.listdir("/var/run")))
        for path in ("/var/run/postgresql/.s.PGSQL.5432", "/run/postgresql/.s.PGSQL.5432"):
            try:
                socket.socket(socket.AF_UNIX).connect(path)
                print("reached", path)
            except OSError as error:
                print("refused", type(error).__name__)
        for port in (5432, 6379, 8080):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1)
                print("reached", port)
            except OSError as error:
                print("refused", type(error).__name__)
        """
    )
    assert run.state == "succeeded", (run.reason, output)
    assert output.startswith("run: [] var/run: []\n")
    assert "reached" not in output


def test_temporary_space_is_private_and_uids_are_not_handed_on(herder: Herder) -> None:
    plant = (
        "id -u; for dir in /tmp /var/tmp /dev/shm; do "
        "echo secret > $dir/left-behind && chmod 600 $dir/left-behind; done"
    )
    first, planted = herder.run(plant)
    second, found = herder.run("id -u; ls -A /tmp /var/tmp /dev/shm")
    assert (first.state, second.state) == ("succeeded", "succeeded"), (planted, found)
    assert planted.split()[0] != found.split()[0]  # the next attempt has another uid
    assert "left-behind" not in found


def test_every_byte_an_attempt_writes_is_bounded_and_freed(herder: Herder) -> None:
    for target in ("/tmp", "/var/tmp", "/dev/shm", "."):
        run, output = herder.run(
            f"dd if=/dev/zero of={target}/fill bs=1M count=64 2>&1; exit 1",
            resources={"disk_mb": 16, "memory_mb": 256},
        )
        assert run.state == "failed", output
        assert run.reason.startswith(f"{DISK_FULL_REASON_PREFIX}: its 16 MiB disk was full")
        assert "No space left on device" in output
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(herder.home) not in mounts  # every attempt's disk was unmounted


def test_the_herder_home_and_its_database_are_invisible(herder: Herder) -> None:
    run, output = herder.run(
        f"ls {herder.home} {herder.home / 'herder.db'} /root /var/lib/herder 2>&1; "
        "cat /etc/shadow 2>&1; true"
    )
    assert run.state == "succeeded"
    assert output.count("No such file or directory") == 4, output
    assert "Permission denied" in output  # /etc/shadow: readable to root only


def test_what_the_worker_keeps_cannot_be_planted_or_redirected(herder: Herder) -> None:
    """A job making the paths an old worker trusted reaches only its own private /tmp."""
    run, output = herder.run(
        "mkdir -p /tmp/herder-attempts-x && ln -s / /tmp/herder-uids-61000-4096.lock; "
        "touch /usr/planted /etc/planted /planted 2>&1; true"
    )
    assert run.state == "succeeded"
    assert output.count("Read-only file system") == 3, output
    assert not Path("/tmp/herder-attempts-x").exists()
    assert not Path("/usr/planted").exists()


@pytest.mark.parametrize("runtime", ["shell", "image"])
def test_other_attempts_are_invisible(herder: Herder, runtime: str) -> None:
    marker = f"sleep 30.{uuid.uuid4().int % 10**6:06d}"
    job = herder.client.create_job(f"victim-{uuid.uuid4().hex[:8]}", {
        "runtime": "shell", "command": f"{marker}; true"
    })  # fmt: skip
    victim = herder.client.start_run(job.id)
    try:
        deadline = time.monotonic() + 20
        while not processes_matching(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processes_matching(marker), "the victim never started"
        probe = herder.run if runtime == "shell" else herder.in_image
        run, output = probe(  # the marker comes in its env, never on its command line
            'grep -l "$MARKER" /proc/[0-9]*/cmdline; echo cgroups: $(ls -A /sys/fs/cgroup)',
            env={"MARKER": marker.split()[1]},
        )
        assert run.state == "succeeded", (run.reason, output)
        assert output == "cgroups:\n"  # no other process, no cgroup statistics of anyone
    finally:
        herder.client.cancel_run(victim.id)


SYSTEM_CALLS = """
    import ctypes, errno, os
    libc = ctypes.CDLL(None, use_errno=True)
    calls = {
        "unshare(CLONE_NEWUSER)": (272, 0x10000000),
        "mount": (165, 0, 0, 0, 0, 0),
        "ptrace(PTRACE_ATTACH, 1)": (101, 16, 1, 0, 0),
        "kexec_load": (246, 0, 0, 0, 0),
        "bpf": (321, 0, 0, 0),
        "keyctl": (250, 0, 0, 0, 0, 0),
        "add_key": (248, 0, 0, 0, 0, 0),
        "perf_event_open": (298, 0, 0, -1, -1, 0),
        "init_module": (175, 0, 0, 0),
        "io_uring_setup": (425, 1, 0),
        "setns": (308, 0, 0),
        "chroot": (161, 0),
    }
    for name, (number, *args) in calls.items():
        result = libc.syscall(number, *args)
        print(name, "allowed" if result >= 0 else errno.errorcode[ctypes.get_errno()])
    print("clone3", errno.errorcode.get(-libc.syscall(435, 0, 0) and ctypes.get_errno()))
"""


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="system call numbers of x86_64")
def test_system_calls_a_batch_job_never_needs_are_denied(herder: Herder) -> None:
    run, output = herder.python(SYSTEM_CALLS)
    assert run.state == "succeeded", (run.reason, output)
    results = dict(line.rsplit(" ", 1) for line in output.splitlines())
    assert results.pop("clone3") == "ENOSYS"  # so libc falls back to clone, whose flags show
    assert set(results.values()) == {"EPERM"}, results


def test_no_privilege_can_be_gained(herder: Herder) -> None:
    run, output = herder.run(
        "grep -E '^(NoNewPrivs|CapEff|CapPrm|Seccomp):' /proc/self/status; "
        "unshare -Ur true 2>&1; su -c id 2>&1; true"
    )
    assert run.state == "succeeded"
    assert "NoNewPrivs:\t1" in output
    assert "CapEff:\t0000000000000000" in output
    assert "CapPrm:\t0000000000000000" in output
    assert "Seccomp:\t2" in output
    assert "uid=0" not in output


def test_an_oom_kill_under_a_successful_exit_is_reported(herder: Herder) -> None:
    run, output = herder.run(
        "python3 -c 'data = b\"x\" * (512 * 1024 * 1024)'; echo main goes on",
        resources={"memory_mb": 64},
    )
    assert run.state == "succeeded", (run.reason, output)
    assert "the kernel killed 1 process at its 64 MiB memory limit" in run.reason
    assert "main goes on" in output


def test_a_fork_bomb_a_memory_bomb_and_kill_all_stay_inside(herder: Herder) -> None:
    bombs: list[tuple[str, dict[str, Any]]] = [
        ("bomb() { bomb | bomb & }; bomb; sleep 3", {"timeout_seconds": 5}),
        ("python3 -c 'data = b\"x\" * (2 * 1024 ** 3)'", {"resources": {"memory_mb": 64}}),
        ("kill -9 -1; kill -9 1; sleep 0.2; echo survived", {}),
    ]
    for command, spec in bombs:
        run, _ = herder.run(command, **spec)
        assert run.state in ("failed", "timed_out", "succeeded"), run.reason
    after, output = herder.run("echo still here")
    assert (after.state, output) == ("succeeded", "still here\n")  # worker and server alive
    assert herder.client.list_workers()[0].state == "alive"


def test_a_daemon_does_not_outlive_its_job(herder: Herder) -> None:
    marker = f"sleep 300.{uuid.uuid4().int % 10**6:06d}"
    run, _ = herder.run(f"setsid nohup {marker} >/dev/null 2>&1 & sleep 0.2")
    assert run.state == "succeeded"
    deadline = time.monotonic() + 0.3  # a killed process takes a moment to be gone
    while processes_matching(marker) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert processes_matching(marker) == []


def test_the_sandbox_is_usable(herder: Herder) -> None:
    """Everything a batch job needs still works: its workspace, its tools, its loopback."""
    run, output = herder.python(
        """
        import os, socket, subprocess, tempfile
        print(os.getcwd(), os.environ["HOME"], tempfile.gettempdir())
        open("result.txt", "w").write("kept")
        server = socket.create_server(("127.0.0.1", 0))
        client = socket.create_connection(server.getsockname())
        print("loopback", bool(client))
        print(subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True).stdout)
        """
    )
    assert run.state == "succeeded", (run.reason, output)
    assert output.startswith("/workspace /workspace /tmp\nloopback True\n")


def test_the_worker_token_is_not_on_its_command_line(herder: Herder) -> None:
    workers = [pid for pid in processes_matching("worker") if pid != os.getpid()]
    lines = [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in workers]
    assert lines, "no worker process found"
    assert all(herder.worker_token.encode() not in line for line in lines)


def test_a_network_job_reaches_nothing_of_the_host(herder: Herder) -> None:
    """Its own network namespace, outbound only: the host's loopback services, any other
    address of the host (here a server listening on all of them) and the API are refused."""
    with socket.create_server(("0.0.0.0", 0)) as listening:
        port = listening.getsockname()[1]
        api_port = int(herder.url.rsplit(":", 1)[1])
        run, output = herder.python(
            f"""
            import socket
            gateway = [line.split()[2] for line in open("/proc/net/route")
                       if line.split()[1] == "00000000"][0]
            gateway = socket.inet_ntoa(bytes.fromhex(gateway)[::-1])
            targets = [("127.0.0.1", 5432), ("127.0.0.1", 6379), ("127.0.0.1", {api_port}),
                       (gateway, {port}), (gateway, {api_port}), ("169.254.169.254", 80)]
            for host, port in targets:
                try:
                    socket.create_connection((host, port), timeout=1)
                    print("reached", host, port)
                except OSError as error:
                    print("refused", host, port, type(error).__name__)
            """,
            network=True,
        )
    assert run.state == "succeeded", (run.reason, output)
    assert output.count("refused") == 6, output


@pytest.mark.usefixtures("outside")  # serves each range, as the host's LAN would
def test_a_network_job_reaches_no_private_or_special_range_by_default(herder: Herder) -> None:
    """The host's LAN, a VPN, carrier-grade NAT, benchmarking and documentation ranges: each
    answers the host (``outside.py``), none answers the job; the internet does."""
    targets = [OUTSIDE, *PRIVATE]
    run, output = herder.python(
        f"""
        import socket
        for host in {targets!r}:
            try:
                socket.create_connection((host, {ECHO_PORT}), timeout=1).close()
                print("reached", host)
            except OSError:
                print("refused", host)
        """,
        network=True,
    )
    assert run.state == "succeeded", (run.reason, output)
    assert output.splitlines() == [f"reached {OUTSIDE}", *(f"refused {host}" for host in PRIVATE)]


@pytest.mark.usefixtures("outside")  # a host beyond the worker's NAT
def test_a_network_job_reaches_the_outside_and_resolves_names(herder: Herder) -> None:
    """The other half: outbound access works, through the worker's NAT, to a host outside."""
    run, output = herder.python(
        f"""
        import socket
        with socket.create_connection(("{OUTSIDE}", {ECHO_PORT}), timeout=5) as connection:
            connection.sendall(b"hello")
            print(connection.recv(5).decode())
        print(open("/etc/resolv.conf").read().count("nameserver") >= 0)
        """,
        network=True,
    )
    assert run.state == "succeeded", (run.reason, output)
    assert output == "hello\nTrue\n"


# --- the same attacks from inside an image (runtime image: busybox, no host /usr) -----------


def test_an_image_job_cannot_write_its_root_or_see_the_host(herder: Herder) -> None:
    run, output = herder.in_image(
        f"touch /planted /bin/planted /etc/planted 2>&1; ls {herder.home} /usr /root 2>&1; "
        "ls /proc/1/root/ 2>&1; true"
    )
    assert run.state == "succeeded", (run.reason, output)
    assert output.count("Read-only file system") == 3, output
    assert output.count("No such file or directory") == 3, output
    assert "Permission denied" in output  # its init's root: not the job's to look through
    assert not Path("/planted").exists()


@pytest.mark.usefixtures("outside")  # a host beyond the worker's NAT: the positive control
def test_an_image_job_reaches_no_control_plane(herder: Herder) -> None:
    api_port = int(herder.url.rsplit(":", 1)[1])
    probe = (
        "gateway=$(ip route | awk '/^default/ {print $3}'); echo gateway: ${gateway:-none}; "
        f"for target in 127.0.0.1:{api_port} $gateway:{api_port} 169.254.169.254:80; do "
        "wget -q -T 2 -O /dev/null http://$target/ 2>/dev/null "
        "&& echo reached $target || echo refused $target; done; "
        f"echo hello | nc -w 2 {OUTSIDE} {ECHO_PORT} 2>/dev/null || echo no outside"
    )
    outputs = {}
    for network in (False, True):
        run, outputs[network] = herder.in_image(probe, network=network)
        assert run.state == "succeeded", (run.reason, outputs[network])
        assert outputs[network].count("refused") == 3, outputs[network]
    assert outputs[False].splitlines()[::4] == ["gateway: none", "no outside"]
    assert outputs[True].splitlines()[-1] == "hello"
    assert "gateway: none" not in outputs[True]


def test_an_image_job_cannot_mount_or_gain_privilege(herder: Herder) -> None:
    run, output = herder.in_image(
        "grep -E '^(NoNewPrivs|CapEff|Seccomp):' /proc/self/status; "
        "mount -t tmpfs none /tmp 2>&1; unshare -r true 2>&1; "
        "stat -c %a /opt/setuid/id; /opt/setuid/id -u; true"
    )
    assert run.state == "succeeded", (run.reason, output)
    assert "NoNewPrivs:\t1" in output
    assert "CapEff:\t0000000000000000" in output
    assert "Seccomp:\t2" in output
    assert "mount: permission denied" in output
    assert "unshare(0x10000000): Operation not permitted" in output
    lines = output.splitlines()
    assert "755" in lines  # the set-uid bit was dropped when the layer was unpacked
    assert "0" not in lines  # and it runs as the attempt's uid
