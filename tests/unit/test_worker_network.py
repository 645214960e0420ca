"""What attempts with ``network: true`` are given: their resolv.conf, their blocked
destinations, and the check that their addresses do not hide the host's own routes."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from herder.worker.nameservers import attempt_resolv_conf
from herder.worker.network import overlapping_routes
from herder.worker.network_filter import (
    ALWAYS_BLOCKED,
    DENIED_BY_DEFAULT,
    blocked_networks,
    denied_networks,
    ruleset,
)

BLOCKED = blocked_networks(["10.200.0.0/16", "169.254.0.0/16", "192.0.2.10"])
RESOLVED_STUB = "nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch corp.example\n"
RESOLVED_UPSTREAM = "nameserver 10.0.0.2\nnameserver 10.0.0.3\nsearch corp.example\n"


@pytest.mark.parametrize(
    ("host", "upstream", "nameservers"),
    [
        ("nameserver 10.0.0.2\n", None, ("10.0.0.2",)),
        # systemd-resolved's stub is on the host's loopback: its upstreams are used instead
        (RESOLVED_STUB, RESOLVED_UPSTREAM, ("10.0.0.2", "10.0.0.3")),
        # the host's own list wins when it has anything an attempt can reach
        ("nameserver 127.0.0.1\nnameserver 9.9.9.9\n", RESOLVED_UPSTREAM, ("9.9.9.9",)),
        # loopback, link-local (a cloud's metadata DNS), IPv6 and blocked ones are unreachable
        ("nameserver 169.254.169.253\nnameserver fd00::53\nnameserver 192.0.2.10\n", None, ()),
        ("nameserver 127.0.0.53\n", None, ()),
        ("nameserver 127.0.0.53\n", "nameserver 127.0.0.1\n", ()),
        ("", None, ()),
        ("# nameserver 10.0.0.9\nnameserver not-an-address\n", None, ()),
    ],
)
def test_attempts_get_the_nameservers_they_can_reach(
    host: str, upstream: str | None, nameservers: tuple[str, ...]
) -> None:
    resolv_conf = attempt_resolv_conf(host, upstream, BLOCKED)

    assert resolv_conf.nameservers == nameservers
    listed = [line.split()[1] for line in resolv_conf.text.splitlines() if line.startswith("n")]
    assert tuple(listed) == nameservers[:3]


def test_search_and_options_come_from_the_file_the_nameservers_came_from() -> None:
    text = attempt_resolv_conf(RESOLVED_STUB, RESOLVED_UPSTREAM, BLOCKED).text
    assert "search corp.example" in text.splitlines()
    assert "options edns0 trust-ad" not in text  # the stub's options are for the stub


def test_an_attempt_without_nameservers_is_told_why_in_its_resolv_conf() -> None:
    text = attempt_resolv_conf("nameserver 127.0.0.53\n", None, BLOCKED).text
    assert "nameserver" not in text.replace("no nameserver", "")
    assert all(line.startswith("#") for line in text.splitlines())


def test_glibc_reads_three_nameservers_at_most() -> None:
    host = "".join(f"nameserver 10.0.0.{n}\n" for n in range(1, 6))
    text = attempt_resolv_conf(host, None, BLOCKED).text
    assert text.count("\nnameserver ") == 3


def test_blocked_destinations_are_merged_ipv4_networks() -> None:
    merged = blocked_networks(["192.0.2.7", "192.0.2.0/24", "2001:db8::1", "10.1.2.3/8"])
    assert merged == [ipaddress.IPv4Network("10.0.0.0/8"), ipaddress.IPv4Network("192.0.2.0/24")]


def networks(*items: str) -> list[ipaddress.IPv4Network]:
    return [ipaddress.IPv4Network(item) for item in items]


DOCUMENTATION_AND_THE_REST = networks(
    "100.64.0.0/10", "172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16",
    "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4",
)  # fmt: skip


@pytest.mark.parametrize(
    ("allowed", "denied"),
    [
        ([], [*networks("10.0.0.0/8"), *DOCUMENTATION_AND_THE_REST]),
        (["10.0.0.0/8", "fd00::/8"], DOCUMENTATION_AND_THE_REST),  # IPv6 opens nothing
        (
            ["10.128.0.0/9", "10.0.0.0/9", "9.0.0.0/8"],  # two halves, and a global range
            DOCUMENTATION_AND_THE_REST,
        ),
        (
            ["10.64.0.0/10"],
            [*networks("10.0.0.0/10", "10.128.0.0/9"), *DOCUMENTATION_AND_THE_REST],
        ),
        (["0.0.0.0/0"], []),
    ],
)
def test_allowed_ranges_are_cut_out_of_the_denied_ones(
    allowed: list[str], denied: list[ipaddress.IPv4Network]
) -> None:
    assert denied_networks(allowed) == sorted(denied)


@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_every_address_that_is_not_global_is_denied_or_blocked(number: int) -> None:
    address = ipaddress.IPv4Address(number)
    closed = networks(*DENIED_BY_DEFAULT, *ALWAYS_BLOCKED)
    if not address.is_global:
        assert any(address in network for network in closed)


def test_docs_list_every_range_denied_by_default() -> None:
    isolation = (Path(__file__).parents[2] / "docs" / "isolation.md").read_text()
    assert [item for item in DENIED_BY_DEFAULT if f"`{item}`" not in isolation] == []


def test_the_filter_lets_attempts_reach_their_nameservers_port_53_alone() -> None:
    nameserver = ipaddress.IPv4Address("10.0.0.2")
    text = ruleset("herder_w", "w", 61000, BLOCKED, denied_networks([]), [nameserver])
    forward = text[text.index("chain forward") :]
    assert "elements = { 10.0.0.2 }" in text
    assert forward.index("@nameservers drop") < forward.index("established,related accept")
    assert "ip daddr @nameservers th dport != 53 drop" in forward
    assert "ip daddr @nameservers meta l4proto != { tcp, udp } drop" in forward
    assert "set nameservers {\n        type ipv4_addr\n    }" in ruleset("t", "w", 1, BLOCKED)


def test_a_workers_filter_touches_its_own_attempts_alone() -> None:
    """A drop in any table is final: one worker's rules must not reach another's attempts."""
    text = ruleset("herder_w61000", "w61000", 61000, BLOCKED, denied_networks([]))
    verdicts = ("drop", "accept", "masquerade")
    rules = [line.strip() for line in text.splitlines() if line.endswith(verdicts)]
    assert len(rules) > 10
    for rule in rules:
        assert rule.startswith(
            ('iifname "hrd*" iifgroup 61000 ', 'oifname "hrd*" oifgroup 61000 ')
        ), rule


PROC_NET_ROUTE = """\
Iface	Destination	Gateway 	Flags	RefCnt	Use	Metric	Mask		MTU	Window	IRTT
eth0	00000000	010200C0	0003	0	0	0	00000000	0	0	0
eth0	000200C0	00000000	0001	0	0	0	00FFFFFF	0	0	0
vpn0	0000000A	00000000	0001	0	0	0	000000FF	0	0	0
hrd0002	0400C80A	00000000	0001	0	0	0	FEFFFFFF	0	0	0
"""


@pytest.mark.parametrize(
    ("pool", "clashes"),
    [
        ("10.200.0.0/16", ["10.0.0.0/8 dev vpn0"]),  # a VPN's 10/8 would be hidden
        ("172.31.0.0/16", []),  # the default route and attempts' own /31s do not count
        ("192.0.2.128/25", ["192.0.2.0/24 dev eth0"]),
    ],
)
def test_a_pool_overlapping_the_hosts_routes_is_found(pool: str, clashes: list[str]) -> None:
    assert overlapping_routes(PROC_NET_ROUTE, ipaddress.IPv4Network(pool)) == clashes
