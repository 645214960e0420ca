"""The address gang peers use to reach this worker, when the operator does not give one."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}


def local_address(server_url: str) -> str:
    """The address of the interface this worker reaches the server through, else the host name.

    "Connecting" a UDP socket sends nothing: the kernel only picks the route and so the local
    address, the one the server (and peers on its network) can most likely reach us at.
    """
    parts = urlsplit(server_url)
    host = parts.hostname
    if host:
        port = parts.port or DEFAULT_PORTS.get(parts.scheme, 80)
        try:
            candidates = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
        except OSError:
            candidates = []
        for family, kind, protocol, _, address in candidates:
            try:
                with socket.socket(family, kind, protocol) as probe:
                    probe.connect(address)
                    return str(probe.getsockname()[0])
            except OSError:
                continue
    return socket.gethostname()
