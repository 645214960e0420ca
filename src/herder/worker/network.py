"""Outbound-only networks for attempts with ``network: true``.

    worker start   nft table inet herder_w<N>: the attempt interfaces (hrd*) of group N filtered
    open()         netns file <state>/netns/hrdXXXX ── veth hrdXXXX ═══ eth0 (in the netns)
                   host end in group N, 10.200.a.b/31; attempt 10.200.a.b+1/31, default route
                   via the host end
    close()        veth deleted, netns unbound: nothing left
    close_all()    the above for every netns file, and the table

What an attempt can reach is decided by the filter (``network_filter.py``), not by routes
(docs/design.md §6): its packets are masqueraded to the host's address and forwarded to anything the
host can route to, except the host itself (any of its addresses, loopback included: refused
before any DNAT of the host and again on input), other attempts (on this worker or another),
link-local addresses (cloud metadata), multicast, the worker's ``blocked`` destinations (the
control plane), and IPv6 (attempts have none). Nothing can open a connection to an attempt.
Packets with a source that is not the attempt's own are dropped, so an attempt cannot pose as
another.

Private, shared (carrier-grade NAT) and the other special-purpose ranges (``DENIED_BY_DEFAULT``:
the operator's own networks, never the internet) are dropped too, unless the worker is told to
``allow`` a range of them; the attempts' nameservers stay reachable on port 53 wherever they
are, or no name would resolve.

A host may run several workers (two pools, a GPU worker beside a CPU one) with rules of their
own, and in nftables a drop in any table is final: so each worker has a number ``N`` no other
worker of the host holds (the base of its uid range, ``uids.reserve_uid_pool``), which names
its table and is the interface group its attempts' host ends are born in, and its table
filters that group's interfaces alone.

Every attempt interface is named ``hrd`` and a slot number, and its addresses follow from the
slot, so the kernel's refusal of a second interface of the same name is what keeps two workers
on one host from taking the same addresses: no lock, no shared file. Which slots are this
worker's is in its state directory (one netns file per slot); the interface's alias names the
worker and the attempt, for an operator's ``ip link``.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import subprocess
import threading
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from herder.worker import nameservers
from herder.worker.netlink import (
    LOOPBACK_INDEX,
    NETLINK_NETFILTER,
    NFPROTO_INET,
    Netlink,
    create_namespace,
    remove_namespace,
)
from herder.worker.network_filter import (
    ALWAYS_BLOCKED,
    INTERFACE_PREFIX,
    blocked_networks,
    denied_networks,
    ruleset,
)

log = logging.getLogger("herder.worker")

DEFAULT_POOL = "10.200.0.0/16"  # attempt addresses, two per attempt; shared by the host's workers
ATTEMPT_INTERFACE = "eth0"
MAX_SLOTS = 0x10000  # four hex digits in an interface name
SLOT_TRIES = 64  # slots held by other workers skipped before giving up
NFT_SECONDS = 10.0
MAX_GROUP = 0xFFFF_FFFF  # interface groups are 32-bit; 0 is every other interface's
MAX_ALIAS_LENGTH = 128  # the kernel keeps up to 255 bytes


class NetworkUnavailable(Exception):
    """Attempt networks cannot be set up on this host; the message says why."""


@dataclass(frozen=True)
class AttemptNetwork:
    namespace: Path  # a bound netns file to setns(2) into
    resolv_conf: Path  # to bind read-only over the attempt's /etc/resolv.conf
    interface: str  # the host end of the veth
    address: ipaddress.IPv4Address  # the attempt's own address


class OutboundNetworks:
    """Per worker: the filter is installed once at start, then one namespace per attempt.

    ``state_dir`` is the worker's root-owned 0700 directory; ``worker`` is its number, held
    by no other worker of the host (module docstring); ``blocked`` adds destinations
    attempts must not reach (addresses or networks; IPv6 ones need nothing, attempts have no
    IPv6); ``allowed`` opens ranges of ``DENIED_BY_DEFAULT`` (``blocked`` still wins).
    ``host_resolver_files`` reads the host's resolv.conf files (``nameservers.host_files``).
    Starting removes what a crashed worker of the same number left. Blocking calls: use a
    thread.
    """

    def __init__(
        self,
        state_dir: Path,
        worker: int,
        blocked: Sequence[str],
        *,
        allowed: Sequence[str] = (),
        pool: str = DEFAULT_POOL,
        host_resolver_files: Callable[[], tuple[str, str | None]] = nameservers.host_files,
    ) -> None:
        if not 0 < worker <= MAX_GROUP:
            raise ValueError(f"a worker's network number is 1 to {MAX_GROUP}, not {worker}")
        self.group = worker
        self._name = f"w{worker}"
        self._pool = ipaddress.IPv4Network(pool)
        self._slots = min(self._pool.num_addresses // 2, MAX_SLOTS)
        if self._slots == 0:
            raise ValueError(f"the attempt address pool {pool} is too small")
        self._blocked = blocked_networks([*ALWAYS_BLOCKED, str(self._pool), *blocked])
        self._denied = denied_networks(allowed)
        self._host_resolver_files = host_resolver_files
        self._namespaces = state_dir / "netns"
        self._resolv_conf = state_dir / "resolv.conf"
        self._resolv_conf_partial = state_dir / "resolv.conf.partial"
        self._lock = threading.Lock()
        self._in_use: set[int] = set()
        self._next = zlib.crc32(self._name.encode()) % self._slots  # workers start apart
        self._ruleset = ""  # installed with the first resolv.conf: it names its nameservers
        self._ruleset_nameservers: tuple[str, ...] | None = None  # those it was made for
        clashes = overlapping_routes(_read("/proc/net/route"), self._pool)
        if clashes:
            raise NetworkUnavailable(
                f"the attempt address pool {self._pool} overlaps the host's routes "
                f"({', '.join(clashes)}): give the worker another pool"
            )
        try:
            self._remove_leftovers()
            self._namespaces.mkdir(mode=0o700, exist_ok=True)
            _enable_forwarding()
            self._refresh_resolv_conf()
        except OSError as error:
            raise NetworkUnavailable(f"cannot set up attempt networks: {error}") from error

    @property
    def table(self) -> str:
        return f"herder_{self._name}"

    def open(self, attempt_id: str) -> AttemptNetwork:
        """A new namespace with outbound access for one attempt."""
        self._check_filter()
        try:
            self._refresh_resolv_conf()
        except OSError as error:
            raise NetworkUnavailable(f"cannot write the attempts' resolv.conf: {error}") from error
        for _ in range(SLOT_TRIES):
            slot = self._claim_slot()
            try:
                network = self._open_slot(slot, attempt_id)
            except FileExistsError:  # another worker holds this slot
                self._release_slot(slot)
                continue
            except OSError as error:
                self._release_slot(slot)
                raise NetworkUnavailable(f"cannot set up the attempt's network: {error}") from error
            return network
        raise NetworkUnavailable(
            f"no free attempt address in {self._pool} after {SLOT_TRIES} tries"
        )

    def close(self, network: AttemptNetwork) -> None:
        """Delete the attempt's interfaces and namespace; closing twice is harmless."""
        with Netlink.here() as host:
            host.delete_link(network.interface)
        remove_namespace(network.namespace)
        self._release_slot(int(network.interface.removeprefix(INTERFACE_PREFIX), 16))

    def close_all(self) -> None:
        """Remove every attempt network of this worker's number, its filter and its files."""
        self._remove_leftovers()
        _nft(f"table inet {self.table}\ndelete table inet {self.table}\n")

    def _check_filter(self) -> None:
        """Without its table an attempt could reach the host (a ``flush ruleset``, such as
        Debian's nftables.service runs, removes it): put it back before handing out more."""
        with Netlink.here(NETLINK_NETFILTER) as netfilter:
            if netfilter.has_nftables_table(NFPROTO_INET, self.table):
                return
        log.warning("attempt networks: the nftables table %s was removed; restoring it", self.table)
        _nft(self._ruleset)

    def _open_slot(self, slot: int, attempt_id: str) -> AttemptNetwork:
        interface = f"{INTERFACE_PREFIX}{slot:04x}"
        path = self._namespaces / interface
        os.close(os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
        created = False
        try:
            gateway, address = self._addresses(slot)
            with create_namespace(path) as inside, Netlink.here() as host:
                namespace = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                alias = f"herder {self._name} {attempt_id}"[:MAX_ALIAS_LENGTH]
                try:
                    index = host.create_veth(
                        interface, ATTEMPT_INTERFACE, namespace, alias, self.group
                    )
                finally:
                    os.close(namespace)
                created = True
                host.add_address(index, gateway)
                host.set_up(index)
                inside.set_up(LOOPBACK_INDEX)
                peer = inside.index(ATTEMPT_INTERFACE)
                inside.add_address(peer, address)
                inside.set_up(peer)
                inside.add_default_route(gateway.ip)
        except BaseException:
            if created:
                with Netlink.here() as host:
                    host.delete_link(interface)
            remove_namespace(path)
            raise
        return AttemptNetwork(path, self._resolv_conf, interface, address.ip)

    def _addresses(self, slot: int) -> tuple[ipaddress.IPv4Interface, ipaddress.IPv4Interface]:
        """The host end's and the attempt's address: a /31 of the pool (RFC 3021)."""
        first = self._pool.network_address + 2 * slot
        return ipaddress.IPv4Interface(f"{first}/31"), ipaddress.IPv4Interface(f"{first + 1}/31")

    def _claim_slot(self) -> int:
        with self._lock:
            if len(self._in_use) >= self._slots:
                raise NetworkUnavailable(f"every address of {self._pool} is in use")
            while self._next in self._in_use:
                self._next = (self._next + 1) % self._slots
            slot = self._next
            self._in_use.add(slot)
            self._next = (slot + 1) % self._slots
            return slot

    def _release_slot(self, slot: int) -> None:
        with self._lock:
            self._in_use.discard(slot)

    def _remove_leftovers(self) -> None:
        """Every netns file here is a slot of this worker's number; its interface is deleted
        only if its alias says it is ours (a crash may have come before our veth existed,
        when another worker's held the name)."""
        if self._namespaces.is_dir():
            with Netlink.here() as host:
                for path in self._namespaces.iterdir():
                    alias = host.alias(path.name)
                    if alias is not None and alias.startswith(f"herder {self._name} "):
                        host.delete_link(path.name)
                    remove_namespace(path)
            self._namespaces.rmdir()
        self._resolv_conf.unlink(missing_ok=True)
        self._resolv_conf_partial.unlink(missing_ok=True)
        with self._lock:
            self._in_use.clear()

    def _refresh_resolv_conf(self) -> None:
        """Rewritten (atomically) only when the host's changed; attempts that have it bound
        keep the file they started with. The filter, which lets attempts reach their
        nameservers, is brought up to date first."""
        wanted = nameservers.attempt_resolv_conf(*self._host_resolver_files(), self._blocked)
        with self._lock:
            if wanted.nameservers != self._ruleset_nameservers:
                self._install_ruleset(wanted.nameservers)
            if _read(self._resolv_conf) == wanted.text:
                return
            if not wanted.nameservers:
                log.warning(
                    "attempt networks: no nameserver of the host is reachable from attempts, "
                    "names will not resolve there (docs/isolation.md, Network)"
                )
            partial = self._resolv_conf_partial
            partial.write_text(wanted.text)
            partial.chmod(0o644)
            partial.replace(self._resolv_conf)

    def _install_ruleset(self, servers: tuple[str, ...]) -> None:
        """The table, letting attempts reach port 53 of ``servers`` in denied ranges."""
        addresses = [ipaddress.IPv4Address(server) for server in servers]
        denied = [one for one in addresses if any(one in network for network in self._denied)]
        self._ruleset = ruleset(
            self.table, self._name, self.group, self._blocked, self._denied, denied
        )
        _nft(self._ruleset)
        self._ruleset_nameservers = servers


def control_plane_addresses(server_url: str) -> list[str]:
    """The addresses a worker's server URL resolves to, for ``blocked``."""
    host = urlsplit(server_url).hostname
    if host is None:
        return []
    try:
        found = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except socket.gaierror:
        return []
    return sorted({str(entry[4][0]) for entry in found})


def overlapping_routes(proc_net_route: str, pool: ipaddress.IPv4Network) -> list[str]:
    """Routes of the host (``/proc/net/route``) that overlap the pool, other than attempts'
    own; the default route overlaps everything and is not counted."""
    clashes = []
    for line in proc_net_route.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8 or fields[0].startswith(INTERFACE_PREFIX):
            continue
        destination = ipaddress.IPv4Address(int.from_bytes(bytes.fromhex(fields[1]), "little"))
        mask = ipaddress.IPv4Address(int.from_bytes(bytes.fromhex(fields[7]), "little"))
        network = ipaddress.IPv4Network(f"{destination}/{mask}", strict=False)
        if network.prefixlen and network.overlaps(pool):
            clashes.append(f"{network} dev {fields[0]}")
    return clashes


def _enable_forwarding() -> None:
    """Attempts' packets are forwarded; like Docker and Podman, this turns on IPv4
    forwarding for the whole host and leaves it on (other users of it may have come since)."""
    path = Path("/proc/sys/net/ipv4/ip_forward")
    if _read(path).strip() != "1":
        path.write_text("1")
        log.info("attempt networks: turned on IPv4 forwarding (net.ipv4.ip_forward=1)")


def _nft(script: str) -> None:
    try:
        done = subprocess.run(
            ["nft", "-f", "-"],
            check=False,
            input=script,
            capture_output=True,
            text=True,
            timeout=NFT_SECONDS,
        )
    except FileNotFoundError as error:
        raise NetworkUnavailable(
            "nft is not installed (Debian: apt-get install nftables)"
        ) from error
    if done.returncode != 0:
        raise NetworkUnavailable(f"nft refused the attempt filter: {done.stderr.strip()}")


def _read(path: str | Path) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""
