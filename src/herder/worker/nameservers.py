"""The resolv.conf an attempt with ``network: true`` sees.

An attempt's network namespace has a loopback of its own, so the host's loopback resolver
(systemd-resolved's 127.0.0.53, a dnsmasq on 127.0.0.1) is not there, and its filter refuses
the host's own addresses and link-local ones. The attempt gets the host's nameservers that it
can reach: those of /etc/resolv.conf, or, when that names only a loopback stub, the upstream
servers that systemd-resolved writes to /run/systemd/resolve/resolv.conf. A nameserver on a
private address stays reachable, on port 53 only (``network.py``). With none left, the
file lists no nameserver (the resolver then tries the attempt's own loopback and fails at once)
and the worker says so in its log.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

HOST_RESOLV_CONF = Path("/etc/resolv.conf")
RESOLVED_UPSTREAM = Path("/run/systemd/resolve/resolv.conf")  # systemd-resolved's upstreams
MAX_NAMESERVERS = 3  # glibc reads no more
KEPT_KEYWORDS = ("search", "domain", "options")


@dataclass(frozen=True)
class AttemptResolvConf:
    text: str
    nameservers: tuple[str, ...]  # those it lists; empty: the attempts cannot resolve names


def attempt_resolv_conf(
    host: str, upstream: str | None, blocked: Sequence[ipaddress.IPv4Network]
) -> AttemptResolvConf:
    """From the host's resolv.conf (and systemd-resolved's upstream one, if any), the file
    for attempts: the nameservers an attempt can reach, and the host's search and options."""
    for source, text in (("/etc/resolv.conf", host), (str(RESOLVED_UPSTREAM), upstream)):
        if text is None:
            continue
        servers = [server for server in _nameservers(text) if _reachable(server, blocked)]
        if servers:
            kept = [line for line in text.splitlines() if _keyword(line) in KEPT_KEYWORDS]
            lines = [f"# herder: the host's nameservers from {source} that attempts can reach"]
            lines += [f"nameserver {server}" for server in servers[:MAX_NAMESERVERS]]
            return AttemptResolvConf(
                "\n".join([*lines, *kept, ""]), tuple(servers[:MAX_NAMESERVERS])
            )
    note = (
        "# herder: no nameserver of the host is reachable from attempts (the host lists only\n"
        "# loopback, link-local, IPv6 or refused addresses): names do not resolve here.\n"
    )
    return AttemptResolvConf(note, ())


def host_files() -> tuple[str, str | None]:
    """The host's /etc/resolv.conf (empty when missing) and systemd-resolved's upstream one."""
    return _read(HOST_RESOLV_CONF) or "", _read(RESOLVED_UPSTREAM)


def _keyword(line: str) -> str:
    words = line.split()
    return words[0] if words else ""


def _nameservers(text: str) -> list[str]:
    servers = []
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "nameserver":
            servers.append(words[1])
    return servers


def _reachable(server: str, blocked: Sequence[ipaddress.IPv4Network]) -> bool:
    """Attempts have IPv4 only, and their filter drops loopback, link-local and ``blocked``."""
    try:
        address = ipaddress.ip_address(server)
    except ValueError:  # e.g. "fe80::1%eth0"
        return False
    if not isinstance(address, ipaddress.IPv4Address):
        return False
    if address.is_loopback or address.is_link_local or address.is_unspecified:
        return False
    return not any(address in network for network in blocked)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None
