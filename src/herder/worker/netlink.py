"""The few netlink requests an attempt network needs, and network namespaces as files.

An attempt's network costs a handful of kernel requests. Sent here on a plain netlink socket
they take tens of microseconds each; an ``ip`` process per step would take ~3 ms each.
pyroute2 (0.9) was tried and left: it opens a socket per thread, lazily, so an object made for
a namespace talks to whichever namespace the calling thread is in, which is the one thing this
code must never get wrong (it configured the host's eth0). A socket belongs to the namespace
it was created in, so ``create_namespace`` creates one inside the new namespace, in a thread
of its own that ends right after. Whether the worker's nftables table is still there is asked the
same way (``has_nftables_table``), on every attempt.

A namespace outlives its processes as a bind mount of its nsfs file, like ``ip netns add``
does under /run/netns; here the file is wherever the caller says, so workers and tests never
share a directory.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import ipaddress
import os
import socket
import struct
import threading
from pathlib import Path

CLONE_NEWNET = 0x40000000
MS_BIND = 0x1000
MNT_DETACH = 0x2
LOOPBACK_INDEX = 1  # the kernel registers lo first in every network namespace

NETLINK_ROUTE = 0
NETLINK_NETFILTER = 12
NFT_MSG_GETTABLE = (10 << 8) | 1  # the nftables subsystem's "get table"
NFTA_TABLE_NAME = 1
NFPROTO_INET = 1
NLM_F_REQUEST = 0x1
NLM_F_ACK = 0x4
NLM_F_EXCL = 0x200
NLM_F_CREATE = 0x400
NLMSG_ERROR = 2
RTM_NEWLINK, RTM_DELLINK, RTM_GETLINK = 16, 17, 18
RTM_NEWADDR = 20
RTM_NEWROUTE = 24
NLA_F_NESTED = 0x8000
IFLA_IFNAME, IFLA_IFALIAS, IFLA_LINKINFO, IFLA_NET_NS_FD, IFLA_GROUP = 3, 20, 18, 28, 27
IFLA_INFO_KIND, IFLA_INFO_DATA = 1, 2
IFLA_AF_SPEC, IFLA_INET6_ADDR_GEN_MODE, ADDR_GEN_NONE = 26, 8, 1
VETH_INFO_PEER = 1
IFA_ADDRESS, IFA_LOCAL = 1, 2
RTA_GATEWAY = 5
RT_TABLE_MAIN, RTPROT_BOOT, RT_SCOPE_UNIVERSE, RTN_UNICAST = 254, 3, 0, 1
IFF_UP = 0x1
RECEIVE_BYTES = 65_536  # an ack, or one link's description

_libc = ctypes.CDLL(None, use_errno=True)


def _ifinfo(index: int = 0, *, up: bool = False) -> bytes:
    flags = IFF_UP if up else 0
    return struct.pack("=BxHiII", socket.AF_UNSPEC, 0, index, flags, flags)


def _attribute(kind: int, value: bytes) -> bytes:
    length = 4 + len(value)
    return struct.pack("=HH", length, kind) + value + b"\0" * (-length % 4)


def _nested(kind: int, *attributes: bytes) -> bytes:
    return _attribute(kind | NLA_F_NESTED, b"".join(attributes))


def _name(kind: int, name: str) -> bytes:
    return _attribute(kind, name.encode() + b"\0")


class Netlink:
    """Requests to one network namespace's kernel (routing, or nftables), one at a time."""

    def __init__(self, sock: socket.socket) -> None:
        self._socket = sock
        self._sequence = 0

    @classmethod
    def here(cls, protocol: int = NETLINK_ROUTE) -> Netlink:
        """A socket in the calling thread's network namespace."""
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, protocol)
        sock.bind((0, 0))
        return cls(sock)

    def close(self) -> None:
        self._socket.close()

    def __enter__(self) -> Netlink:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def create_veth(self, name: str, peer: str, peer_namespace: int, alias: str, group: int) -> int:
        """A veth pair, both ends down, the peer born in ``peer_namespace`` (an open nsfs
        descriptor); this end is born in interface group ``group`` and gets no IPv6 address,
        so it takes no IPv6 traffic and costs no address setup. Returns this end's index. A
        name taken already raises ``FileExistsError``: the caller's claim on it failed."""
        peer_info = _ifinfo() + _name(IFLA_IFNAME, peer)
        peer_info += _attribute(IFLA_NET_NS_FD, struct.pack("=I", peer_namespace))
        kind = _name(IFLA_INFO_KIND, "veth")
        data = _nested(IFLA_INFO_DATA, _attribute(VETH_INFO_PEER, peer_info))
        body = _ifinfo() + _name(IFLA_IFNAME, name)
        body += _attribute(IFLA_GROUP, struct.pack("=I", group))
        body += _nested(IFLA_LINKINFO, kind, data)
        self._call(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, body)
        index = self.index(name)
        named = _ifinfo(index) + _name(IFLA_IFALIAS, alias)
        no_ipv6 = _nested(
            IFLA_AF_SPEC,
            _nested(socket.AF_INET6, _attribute(IFLA_INET6_ADDR_GEN_MODE, bytes([ADDR_GEN_NONE]))),
        )
        try:
            self._call(RTM_NEWLINK, 0, named + no_ipv6)
        except OSError as error:
            if error.errno != errno.EAFNOSUPPORT:  # a host booted without IPv6
                raise
            self._call(RTM_NEWLINK, 0, named)
        return index

    def index(self, name: str) -> int:
        (index,) = struct.unpack_from("=4xi", self._link(name))
        return int(index)

    def alias(self, name: str) -> str | None:
        """The link's alias ("" when it has none); None when there is no such link."""
        try:
            reply = self._link(name)
        except OSError as error:
            if error.errno == errno.ENODEV:
                return None
            raise
        offset = 16  # after the ifinfomsg
        while offset + 4 <= len(reply):
            length, kind = struct.unpack_from("=HH", reply, offset)
            if length < 4:
                break
            if kind == IFLA_IFALIAS:
                return reply[offset + 4 : offset + length].rstrip(b"\0").decode(errors="replace")
            offset += (length + 3) & ~3
        return ""

    def _link(self, name: str) -> bytes:
        self._send(RTM_GETLINK, 0, _ifinfo() + _name(IFLA_IFNAME, name))
        return self._receive()

    def set_up(self, index: int) -> None:
        self._call(RTM_NEWLINK, 0, _ifinfo(index, up=True))

    def add_address(self, index: int, interface: ipaddress.IPv4Interface) -> None:
        address = interface.ip.packed
        header = struct.pack(
            "=BBBBI", socket.AF_INET, interface.network.prefixlen, 0, RT_SCOPE_UNIVERSE, index
        )
        body = header + _attribute(IFA_LOCAL, address) + _attribute(IFA_ADDRESS, address)
        self._call(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, body)

    def add_default_route(self, gateway: ipaddress.IPv4Address) -> None:
        header = struct.pack(
            "=BBBBBBBBI",
            socket.AF_INET,
            0,  # destination prefix length: the default route
            0,
            0,
            RT_TABLE_MAIN,
            RTPROT_BOOT,
            RT_SCOPE_UNIVERSE,
            RTN_UNICAST,
            0,
        )
        self._call(
            RTM_NEWROUTE,
            NLM_F_CREATE | NLM_F_EXCL,
            header + _attribute(RTA_GATEWAY, gateway.packed),
        )

    def delete_link(self, name: str) -> None:
        """Remove a link (a veth takes its peer along), if it is there."""
        try:
            self._call(RTM_DELLINK, 0, _ifinfo() + _name(IFLA_IFNAME, name))
        except OSError as error:
            if error.errno != errno.ENODEV:
                raise

    def has_nftables_table(self, family: int, name: str) -> bool:
        """Whether nftables has this table (on a ``NETLINK_NETFILTER`` socket): tens of
        microseconds, where asking ``nft`` takes milliseconds."""
        header = struct.pack("=BBH", family, 0, 0)  # nfgenmsg: family, version 0, resource 0
        try:
            self._call(NFT_MSG_GETTABLE, 0, header + _name(NFTA_TABLE_NAME, name))
        except FileNotFoundError:
            return False
        return True

    def _call(self, kind: int, flags: int, body: bytes) -> None:
        self._send(kind, flags | NLM_F_ACK, body)
        self._receive()

    def _send(self, kind: int, flags: int, body: bytes) -> None:
        self._sequence += 1
        header = struct.pack(
            "=IHHII", 16 + len(body), kind, flags | NLM_F_REQUEST, self._sequence, 0
        )
        self._socket.send(header + body)

    def _receive(self) -> bytes:
        """The body of the reply to the last request; a kernel error as ``OSError``."""
        while True:
            data = self._socket.recv(RECEIVE_BYTES)
            offset = 0
            while offset + 16 <= len(data):
                length, kind, _, sequence, _ = struct.unpack_from("=IHHII", data, offset)
                body = data[offset + 16 : offset + length]
                offset += (length + 3) & ~3
                if sequence != self._sequence:
                    continue  # a late answer to an earlier request
                if kind == NLMSG_ERROR:
                    (code,) = struct.unpack_from("=i", body)
                    if code:
                        raise OSError(-code, os.strerror(-code))
                return body


def create_namespace(path: Path) -> Netlink:
    """A new network namespace bound on ``path`` (an empty file), IPv6 off, lo down; the
    socket returned configures it. Runs in a fresh thread: ``unshare`` moves only the calling
    thread, and that thread ends here instead of being handed back to a pool in the wrong
    namespace."""
    result: list[Netlink | BaseException] = []

    def inside() -> None:
        try:
            _check(_libc.unshare(CLONE_NEWNET), "unshare")
            for conf in ("all", "default"):  # attempts have no IPv6: no link-local chatter
                with contextlib.suppress(FileNotFoundError):  # a host booted without IPv6
                    Path(f"/proc/sys/net/ipv6/conf/{conf}/disable_ipv6").write_text("1")
            source = b"/proc/thread-self/ns/net"
            _check(_libc.mount(source, os.fsencode(path), None, MS_BIND, None), "mount")
            result.append(Netlink.here())
        except BaseException as error:
            result.append(error)

    thread = threading.Thread(target=inside, name="herder-netns")
    thread.start()
    thread.join()
    outcome = result[0]
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def remove_namespace(path: Path) -> None:
    """Unbind and delete ``path``; the namespace itself goes when its last process leaves."""
    if _libc.umount2(os.fsencode(path), MNT_DETACH) != 0:
        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOENT):  # not mounted, or no file at all
            raise OSError(code, f"umount {path}: {os.strerror(code)}")
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")
