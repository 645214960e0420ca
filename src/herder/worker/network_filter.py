"""What attempts with ``network: true`` may reach: the per-worker nftables table.

Dropped: the host itself (before any DNAT), other attempts, link-local, multicast and
"this network" (``ALWAYS_BLOCKED``), the attempt pool and the worker's ``blocked`` destinations
(the control plane, ``--block``); and the operator's networks — private, shared (carrier-grade
NAT) and the other special-purpose ranges (``DENIED_BY_DEFAULT``) — unless the worker opens a
range (``--allow-cidr``), except port 53 of the attempts' nameservers there. No IPv6.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

INTERFACE_PREFIX = "hrd"  # host end of every attempt's veth: hrd0000 … hrdffff
ALWAYS_BLOCKED = (
    "0.0.0.0/8",  # "this network"
    "127.0.0.0/8",  # loopback
    "169.254.0.0/16",  # link-local: cloud metadata (169.254.169.254), AWS DNS and time
    "224.0.0.0/3",  # multicast, reserved, broadcast
)
DENIED_BY_DEFAULT = (  # IANA's special-purpose IPv4 ranges that are not globally reachable
    "10.0.0.0/8",  # private (RFC 1918)
    "172.16.0.0/12",  # private (RFC 1918)
    "192.168.0.0/16",  # private (RFC 1918)
    "100.64.0.0/10",  # shared address space: carrier-grade NAT, Tailscale and the like
    "192.0.0.0/24",  # IETF protocol assignments
    "192.0.2.0/24",  # documentation (TEST-NET-1), yet some hosts' real LANs
    "198.51.100.0/24",  # documentation (TEST-NET-2)
    "203.0.113.0/24",  # documentation (TEST-NET-3)
    "198.18.0.0/15",  # benchmarking, often internal test networks
    "240.0.0.0/4",  # reserved (also inside ALWAYS_BLOCKED's 224.0.0.0/3)
)
NAMESERVER_PORT = 53


def blocked_networks(destinations: Sequence[str]) -> list[ipaddress.IPv4Network]:
    """IPv4 addresses and networks, merged; IPv6 ones are dropped (attempts have no IPv6)."""
    networks = [ipaddress.ip_network(item, strict=False) for item in destinations]
    return list(ipaddress.collapse_addresses(n for n in networks if n.version == 4))


def denied_networks(allowed: Sequence[str]) -> list[ipaddress.IPv4Network]:
    """``DENIED_BY_DEFAULT`` less the ``allowed`` networks (IPv6 ones mean nothing here)."""
    denied = [ipaddress.IPv4Network(network) for network in DENIED_BY_DEFAULT]
    for opened in blocked_networks(allowed):
        kept: list[ipaddress.IPv4Network] = []
        for network in denied:
            if opened.supernet_of(network):
                continue
            if network.supernet_of(opened):
                kept.extend(network.address_exclude(opened))
            else:
                kept.append(network)
        denied = kept
    return list(ipaddress.collapse_addresses(denied))


def ruleset(
    table: str,
    worker: str,
    group: int,
    blocked: Sequence[ipaddress.IPv4Network],
    denied: Sequence[ipaddress.IPv4Network] = (),
    nameservers: Sequence[ipaddress.IPv4Address] = (),
) -> str:
    """The worker's nftables table, replacing any table of that name in one transaction.

    Every table's base chains see every packet of the host and a drop in any of them is
    final, so a worker's rules match only its own attempts: their interfaces are named
    ``hrd*`` and born in the worker's interface ``group``. A range one worker allows is then
    open to its attempts whatever another worker of the host denies. The host's own
    addresses are refused in prerouting (``fib daddr type``), before any DNAT rule (Docker's
    published ports) could turn them into something forwarded. ``denied`` ranges are refused
    when forwarding, after any DNAT, except port 53 of ``nameservers`` (those in them).
    """
    attempts = f'"{INTERFACE_PREFIX}*"'  # any attempt's, this worker's or another's
    own_in = f"iifname {attempts} iifgroup {group}"  # from this worker's attempts
    own_out = f"oifname {attempts} oifgroup {group}"  # to them
    return f"""table inet {table}
delete table inet {table}
table inet {table} {{
    comment "herder worker {worker}: outbound-only networks of its attempts (group {group})"
    set blocked {{
        type ipv4_addr
        flags interval{_elements(blocked)}
    }}
    set denied {{
        type ipv4_addr
        flags interval{_elements(denied)}
    }}
    set nameservers {{
        type ipv4_addr{_elements(nameservers)}
    }}
    chain prerouting {{
        type filter hook prerouting priority raw; policy accept;
        {own_in} meta nfproto ipv6 drop
        {own_in} fib saddr . iif oif missing drop
        {own_in} fib daddr type != unicast drop
        {own_in} ip daddr @blocked drop
    }}
    chain input {{
        type filter hook input priority filter; policy accept;
        {own_in} drop
    }}
    chain forward {{
        type filter hook forward priority filter; policy accept;
        {own_in} oifname {attempts} drop
        {own_in} ip daddr @blocked drop
        {own_in} ip daddr @denied ip daddr != @nameservers drop
        {own_in} ip daddr @nameservers meta l4proto != {{ tcp, udp }} drop
        {own_in} ip daddr @nameservers th dport != {NAMESERVER_PORT} drop
        {own_out} ct state established,related accept
        {own_out} drop
    }}
    chain output {{
        type filter hook output priority filter; policy accept;
        {own_out} ct state established,related accept
        {own_out} drop
    }}
    chain postrouting {{
        type nat hook postrouting priority srcnat; policy accept;
        {own_in} oifname != {attempts} masquerade
    }}
}}
"""


def _elements(items: Sequence[ipaddress.IPv4Network | ipaddress.IPv4Address]) -> str:
    """A set's elements line (none for an empty set: nftables refuses ``elements = { }``)."""
    if not items:
        return ""
    return f"\n        elements = {{ {', '.join(str(item) for item in items)} }}"
