"""A job with ``network: true`` reaches the outside, and nothing of the host, the control
plane, other attempts, link-local (metadata) addresses or, unless the worker allows them,
private and special-purpose ranges (docs/design.md §6).

"The outside" is a network namespace of the test's own, joined to the host by a veth, with a
global, a link-local and private-range addresses (``outside.py``), each served by a TCP echo
server, so a refused destination is one a plain host could reach. The job's side is a process
run as an unprivileged uid in the attempt's namespace (``nsenter`` + ``setpriv``), as the
sandbox will. Other workers may run on the host meanwhile (the tests take their numbers as
workers do); the last test runs two real root workers with rules of their own side by side.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import socketserver
import threading
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from herder.worker import nameservers
from herder.worker.host import UID_LOCKS
from herder.worker.network import DEFAULT_POOL, MAX_SLOTS, AttemptNetwork, OutboundNetworks
from herder.worker.statedir import secure_directory
from herder.worker.uids import reserve_uid_pool
from tests.system.conftest import Cluster, stop, wait_until
from tests.system.outside import (
    CONTROL_PLANE,
    ECHO_PORT,
    ECHO_SERVER,
    HOST_END,
    LINK_LOCAL,
    NOBODY,
    OUTSIDE,
    PRIVATE,
    PYTHON,
    echo_server,
    in_namespace,
    run,
    serving,
)

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(
        os.geteuid() != 0, reason="attempt networks need root (namespaces, veths, nftables)"
    ),
]

METADATA = "169.254.169.254"
TEST_NUMBERS = 3_000_000_000  # far above the uid ranges workers take (61000 and up)
CONNECT_SECONDS = 2.5  # an allowed echo under a loaded CI box took over 1 s once

# Every target at once, each given CONNECT_SECONDS: "echoed" or why not.
PROBE = """
import json, socket, sys, threading
results = {}
def probe(target):
    host, port = target.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=float(sys.argv[1])) as s:
            s.sendall(b"ping")
            results[target] = "echoed" if s.recv(64) == b"ping" else "no echo"
    except OSError as error:
        results[target] = type(error).__name__
threads = [threading.Thread(target=probe, args=(t,)) for t in sys.argv[2:]]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps(results))
"""


def as_nobody(*command: str) -> list[str]:
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *command]


def probe(namespace: Path | None, *targets: str) -> dict[str, str]:
    """Connect from the attempt's namespace as an unprivileged uid (None: from the host)."""
    command = as_nobody(PYTHON, "-c", PROBE, str(CONNECT_SECONDS), *targets)
    if namespace is not None:
        command = in_namespace(namespace, *command)
    result: dict[str, str] = json.loads(run(*command))
    return result


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.sendall(self.request.recv(64))


@pytest.fixture(scope="module")
def host_port() -> Iterator[int]:
    """An echo server of the host on every address it has, loopback included."""
    with socketserver.ThreadingTCPServer(("0.0.0.0", 0), _Echo) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        yield int(server.server_address[1])
        server.shutdown()
        thread.join()


@pytest.fixture
def number() -> Iterator[Callable[[], int]]:
    """Worker numbers no worker of the host holds while the test runs: taken as a root
    worker takes its own, a uid range (of one) in the host's lock directory."""
    with contextlib.ExitStack() as held:

        def take() -> int:
            pool, lock = reserve_uid_pool(TEST_NUMBERS, 1, secure_directory(UID_LOCKS))
            held.callback(lock.release)
            return pool.base

        yield take


@pytest.fixture
def networks(tmp_path: Path, number: Callable[[], int]) -> Iterator[OutboundNetworks]:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    networks = OutboundNetworks(state, number(), [CONTROL_PLANE])
    yield networks
    networks.close_all()


def host_addresses() -> list[str]:
    """Every IPv4 address of the host, attempts' gateways and loopback included."""
    found = json.loads(run("ip", "-json", "-4", "addr"))
    return [entry["local"] for link in found for entry in link["addr_info"]]


def test_an_attempt_reaches_the_outside_and_nothing_of_the_host_or_the_control_plane(
    outside: Path, host_port: int, networks: OutboundNetworks
) -> None:
    attempt, other = networks.open("attempt-a"), networks.open("attempt-b")
    with echo_server(other.namespace):
        refused = [
            f"{CONTROL_PLANE}:{ECHO_PORT}",
            f"{LINK_LOCAL}:{ECHO_PORT}",
            f"{METADATA}:80",
            f"{other.address}:{ECHO_PORT}",
            *(f"{address}:{host_port}" for address in host_addresses()),
        ]
        # Each refused destination answers when asked from where it should answer.
        from_host = probe(None, f"{CONTROL_PLANE}:{ECHO_PORT}", f"{LINK_LOCAL}:{ECHO_PORT}")
        from_host |= probe(None, *(f"{address}:{host_port}" for address in host_addresses()))
        assert set(from_host.values()) == {"echoed"}
        assert probe(other.namespace, f"127.0.0.1:{ECHO_PORT}") == {
            f"127.0.0.1:{ECHO_PORT}": "echoed"
        }

        seen = probe(attempt.namespace, f"{OUTSIDE}:{ECHO_PORT}", *refused)

        assert seen.pop(f"{OUTSIDE}:{ECHO_PORT}") == "echoed"
        assert f"127.0.0.1:{host_port}" in seen
        assert f"{gateway(attempt)}:{host_port}" in seen
        assert {target: result for target, result in seen.items() if result == "echoed"} == {}
        # Nothing opens a connection to an attempt, not even the host.
        assert probe(None, f"{other.address}:{ECHO_PORT}") != {
            f"{other.address}:{ECHO_PORT}": "echoed"
        }


def test_private_and_special_ranges_are_refused_unless_the_worker_allows_them(
    outside: Path, networks: OutboundNetworks, tmp_path: Path, number: Callable[[], int]
) -> None:
    targets = [f"{address}:{ECHO_PORT}" for address in PRIVATE]
    assert set(probe(None, *targets).values()) == {"echoed"}  # the host reaches them all
    denying = networks.open("attempt-a")

    seen = probe(denying.namespace, f"{OUTSIDE}:{ECHO_PORT}", *targets)

    assert seen == {f"{OUTSIDE}:{ECHO_PORT}": "echoed"} | dict.fromkeys(targets, "TimeoutError")

    state = tmp_path / "opened"
    state.mkdir(mode=0o700)
    private_10, private_172, *_ = PRIVATE
    opened = OutboundNetworks(
        state, number(), [CONTROL_PLANE, private_172],  # --block wins over --allow-cidr
        allowed=["10.254.0.0/16", "172.16.0.0/12"],
    )  # fmt: skip
    try:  # beside the worker that denies them all, as two workers of one host
        seen = probe(opened.open("attempt-b").namespace, *targets)
        still = probe(denying.namespace, *targets)
    finally:
        opened.close_all()
    assert seen.pop(f"{private_10}:{ECHO_PORT}") == "echoed"
    assert set(seen.values()) == {"TimeoutError"}
    assert set(still.values()) == {"TimeoutError"}


def test_a_nameserver_on_a_private_address_is_reached_on_port_53_only(
    outside: Path, tmp_path: Path, number: Callable[[], int], networks: OutboundNetworks
) -> None:
    """Beside another worker (``networks``) whose attempts have other nameservers: its
    filter denies that private range to its own attempts only."""
    nameserver = next(iter(PRIVATE))
    state = tmp_path / "resolving"
    state.mkdir(mode=0o700)
    resolving = OutboundNetworks(
        state, number(), [CONTROL_PLANE],
        host_resolver_files=lambda: (f"nameserver {nameserver}\nsearch example\n", None),
    )  # fmt: skip
    targets = [f"{nameserver}:53", f"{nameserver}:{ECHO_PORT}"]
    try:
        attempt, other = resolving.open("attempt-a"), networks.open("attempt-b")
        assert f"nameserver {nameserver}\n" in attempt.resolv_conf.read_text()
        with serving(outside, ECHO_SERVER, "53"):
            seen = probe(attempt.namespace, *targets)
            beside = probe(other.namespace, *targets)
    finally:
        resolving.close_all()
    assert seen == {f"{nameserver}:53": "echoed", f"{nameserver}:{ECHO_PORT}": "TimeoutError"}
    assert beside == dict.fromkeys(targets, "TimeoutError")


def test_a_port_the_host_publishes_by_dnat_is_refused_too(
    outside: Path, networks: OutboundNetworks
) -> None:
    """Docker publishes a container's port as a DNAT rule on the host's addresses; asked
    through it, the host would forward the job to a destination it may otherwise reach."""
    table = f"herder_test_dnat_{os.getpid()}"
    published = f"{HOST_END}:{ECHO_PORT + 1}"
    rule = f"ip daddr {HOST_END} tcp dport {ECHO_PORT + 1} dnat to {OUTSIDE}:{ECHO_PORT}"
    chain = f"chain prerouting {{ type nat hook prerouting priority dstnat; {rule}; }}"
    run("nft", "-f", "-", stdin=f"table ip {table} {{\n{chain}\n}}\n")
    try:
        attempt = networks.open("attempt-a")
        assert probe(attempt.namespace, published) == {published: "TimeoutError"}
    finally:
        run("nft", "delete", "table", "ip", table)


def test_an_attempt_has_its_own_loopback_and_no_ipv6(networks: OutboundNetworks) -> None:
    attempt = networks.open("attempt-a")
    links = json.loads(run(*in_namespace(attempt.namespace, "ip", "-json", "addr")))
    addresses = {link["ifname"]: [a["local"] for a in link["addr_info"]] for link in links}
    assert addresses == {"lo": ["127.0.0.1"], "eth0": [str(attempt.address)]}
    route = run(*in_namespace(attempt.namespace, "ip", "route", "show", "default"))
    assert route.split()[:3] == ["default", "via", str(gateway(attempt))]


def test_the_attempts_resolv_conf_lists_the_nameservers_it_can_reach(
    networks: OutboundNetworks,
) -> None:
    attempt = networks.open("attempt-a")
    expected = nameservers.attempt_resolv_conf(
        *nameservers.host_files(), [ipaddress.IPv4Network(DEFAULT_POOL)]
    )
    assert attempt.resolv_conf.read_text() == expected.text
    assert attempt.resolv_conf.stat().st_mode & 0o777 == 0o644


def test_closing_leaves_nothing_behind(tmp_path: Path, number: Callable[[], int]) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    networks = OutboundNetworks(state, number(), [])
    name = f"w{networks.group}"
    first, second = networks.open("attempt-a"), networks.open("attempt-b")
    assert f"herder {name} attempt-a" in run("ip", "link")

    networks.close(first)
    networks.close(first)  # twice is harmless

    assert first.interface not in run("ip", "link")
    assert str(first.namespace) not in Path("/proc/self/mountinfo").read_text()
    assert not first.namespace.exists()
    assert second.interface in run("ip", "link")

    networks.close_all()

    assert f"herder {name}" not in run("ip", "link")
    assert second.interface not in run("ip", "link")
    assert f"herder_{name}" not in run("nft", "list", "tables")
    assert str(state) not in Path("/proc/self/mountinfo").read_text()
    assert list(state.iterdir()) == []


def test_attempts_opened_and_closed_at_once_get_addresses_of_their_own(
    networks: OutboundNetworks, outside: Path
) -> None:
    with ThreadPoolExecutor(max_workers=8) as pool:
        opened = list(pool.map(networks.open, [f"attempt-{n}" for n in range(8)]))
        assert len({network.address for network in opened}) == 8
        assert probe(opened[-1].namespace, f"{OUTSIDE}:{ECHO_PORT}") == {
            f"{OUTSIDE}:{ECHO_PORT}": "echoed"
        }
        list(pool.map(networks.close, opened))
    links = run("ip", "link")
    assert not any(network.interface in links for network in opened)


def test_a_filter_removed_from_under_the_worker_is_back_before_the_next_attempt(
    networks: OutboundNetworks, host_port: int
) -> None:
    run("nft", "delete", "table", "inet", networks.table)  # as `flush ruleset` would

    attempt = networks.open("attempt-a")

    assert f"inet {networks.table}" in run("nft", "list", "tables")
    target = f"{gateway(attempt)}:{host_port}"
    assert probe(attempt.namespace, target) == {target: "TimeoutError"}


def test_a_restarted_worker_removes_what_a_crashed_one_left(
    tmp_path: Path, number: Callable[[], int]
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    crashed = OutboundNetworks(state, number(), [])
    name = f"w{crashed.group}"
    left = [crashed.open("attempt-a"), crashed.open("attempt-b")]  # never closed

    restarted = OutboundNetworks(state, crashed.group, [])
    try:
        assert f"herder {name}" not in run("ip", "link")
        assert not any(network.namespace.exists() for network in left)
        assert restarted.open("attempt-c").interface in run("ip", "link")
    finally:
        restarted.close_all()


def test_an_interface_another_worker_holds_is_skipped_and_left_alone(
    tmp_path: Path, number: Callable[[], int]
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    worker = number()
    first_slot = zlib.crc32(f"w{worker}".encode()) % min(
        ipaddress.IPv4Network(DEFAULT_POOL).num_addresses // 2, MAX_SLOTS
    )
    held = f"hrd{first_slot:04x}"
    run("ip", "link", "add", held, "type", "veth", "peer", "name", f"htp{os.getpid() % 100_000}")
    networks = OutboundNetworks(state, worker, [])
    try:
        attempt = networks.open("attempt-a")
        assert attempt.interface != held
        networks.close_all()
        assert held in run("ip", "link", "show", held)
    finally:
        networks.close_all()
        run("ip", "link", "del", held)


# A job's side of a probe: each target echoed, or refused.
JOB_PROBE = """
import socket, sys
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=2) as connection:
            connection.sendall(b"ping")
            print(target, "echoed" if connection.recv(64) == b"ping" else "no echo")
    except OSError as error:
        print(target, type(error).__name__)
"""


def test_two_workers_of_one_host_keep_to_their_own_network_rules(
    outside: Path, start_cluster: Callable[..., Cluster]
) -> None:
    """Two root workers side by side (two pools, a GPU worker beside a CPU one), one opening
    a private range: its jobs reach it, the other's do not; each worker's filter is a table of
    its own, gone when it stops."""
    cluster = start_cluster()
    private = next(iter(PRIVATE))
    workers = {
        "opening": cluster.start_worker("opening", "--label", "net=opening",
                                        "--allow-cidr", f"{private}/16"),
        "denying": cluster.start_worker("denying", "--label", "net=denying"),
    }  # fmt: skip
    targets = [f"{OUTSIDE}:{ECHO_PORT}", f"{private}:{ECHO_PORT}"]
    with cluster.client() as herder:
        wait_until(lambda: len(herder.list_workers()) == 2, 30, "both workers registered")
        tables = {name: worker_table(cluster, name) for name in workers}
        assert len(set(tables.values())) == 2
        assert set(tables.values()) <= nftables_tables()
        runs = {}
        for name in workers:
            spec = {
                "runtime": "shell", "network": True, "requires": {"net": name},
                "command": f"{PYTHON} -c '{JOB_PROBE}' {' '.join(targets)}",
                "resources": {"cpu": 0.1, "memory_mb": 64},
            }  # fmt: skip
            runs[name] = herder.start_run(herder.create_job(f"probe-{name}", spec).id).id
        output = {}
        for name, run_id in runs.items():
            assert herder.wait(run_id, timeout=60).state == "succeeded"
            output[name] = "".join(chunk.text for chunk in herder.logs(run_id).chunks)
    assert output == {
        "opening": f"{targets[0]} echoed\n{targets[1]} echoed\n",
        "denying": f"{targets[0]} echoed\n{targets[1]} TimeoutError\n",
    }
    for worker in workers.values():
        stop(worker)
    assert not set(tables.values()) & nftables_tables()


def nftables_tables() -> set[str]:
    """The names of the host's inet tables."""
    lines = run("nft", "list", "tables").splitlines()
    return {line.split()[2] for line in lines if line.startswith("table inet ")}


def worker_table(cluster: Cluster, name: str) -> str:
    """The worker's nftables table: named after its uid range, as its state directory is."""
    (state,) = (cluster.home / f"worker-{name}").glob("worker-*")
    return f"herder_w{state.name.removeprefix('worker-')}"


def gateway(network: AttemptNetwork) -> ipaddress.IPv4Address:
    return network.address - 1
