"""A host "outside" the worker: its own network namespace, routed from this host by a veth,
with a global address (the internet), link-local and private-range ones, each served by a TCP
echo server. What a job with ``network: true`` should reach, or be refused, as a plain host
would reach it. The ``outside`` fixture (conftest.py) makes one per test module.

The internet is played by 192.88.99.0/24, a global range nothing uses any more (the 6to4
relay anycast, deprecated by RFC 7526): routed here into the test's own namespace, as every
other address below is by a /32 route, so no packet of the tests leaves this host."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

PYTHON = "/usr/bin/python3"  # readable by the unprivileged uid, unlike a venv under /root
NOBODY = "65534"
ECHO_PORT = 7777
OUTSIDE = "192.88.99.2"  # an ordinary destination
CONTROL_PLANE = "192.88.99.3"  # served outside too, but blocked by the worker
LINK_LOCAL = "169.254.77.77"  # routed to the outside like a metadata service would be
HOST_END = "192.88.99.1"  # the host's address on the outside's link
PRIVATE = {  # one address of each kind of range a job may not reach unless allowed
    "10.254.77.77": "private (10/8)",
    "172.31.254.77": "private (172.16/12)",
    "192.168.254.77": "private (192.168/16)",
    "100.64.77.77": "shared, carrier-grade NAT (100.64/10)",
    "198.18.77.77": "benchmarking (198.18/15)",
    "203.0.113.77": "documentation (203.0.113/24)",
}
ROUTED = (LINK_LOCAL, *PRIVATE)  # addresses of the outside host beyond its link

ECHO_SERVER = """
import socket, sys, threading
server = socket.create_server(("0.0.0.0", int(sys.argv[1])), reuse_port=True)
print("ready", flush=True)
def echo(connection):
    with connection:
        connection.sendall(connection.recv(64))
while True:
    threading.Thread(target=echo, args=(server.accept()[0],), daemon=True).start()
"""


def run(*command: str, stdin: str | None = None) -> str:
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{command}: exit {done.returncode}: {done.stderr}"
    return done.stdout


def in_namespace(namespace: Path, *command: str) -> list[str]:
    return ["nsenter", f"--net={namespace}", *command]


@contextlib.contextmanager
def serving(namespace: Path, source: str, *arguments: str) -> Iterator[None]:
    """A Python server ``source`` in ``namespace``, from its first "ready" line until the end."""
    command = in_namespace(namespace, PYTHON, "-c", source, *arguments)
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            assert process.stdout.readline() == "ready\n"
            yield
        finally:
            process.kill()


def echo_server(namespace: Path) -> contextlib.AbstractContextManager[None]:
    return serving(namespace, ECHO_SERVER, str(ECHO_PORT))


@contextlib.contextmanager
def outside_host(directory: Path) -> Iterator[Path]:
    """The outside host's namespace file, set up under ``directory``, removed after."""
    namespace = directory / "netns"
    namespace.touch()
    link = f"hto{os.getpid() % 100_000}"
    run("unshare", f"--net={namespace}", "true")
    try:
        batch = (
            f"link add eth0 type veth peer name {link} netns {os.getpid()}\n"
            f"addr add {OUTSIDE}/24 dev eth0\naddr add {CONTROL_PLANE}/24 dev eth0\n"
            + "".join(f"addr add {address}/32 dev eth0\n" for address in ROUTED)
            + "link set eth0 up\nlink set lo up\n"
        )
        run(*in_namespace(namespace, "ip", "-batch", "-"), stdin=batch)
        run("ip", "-batch", "-", stdin=f"addr add {HOST_END}/24 dev {link}\nlink set {link} up\n")
        routes = "".join(f"route add {address}/32 via {OUTSIDE} dev {link}\n" for address in ROUTED)
        run("ip", "-batch", "-", stdin=routes)
        with echo_server(namespace):
            yield namespace
    finally:
        subprocess.run(["ip", "link", "del", link], capture_output=True, check=False)
        subprocess.run(["umount", str(namespace)], check=True)
