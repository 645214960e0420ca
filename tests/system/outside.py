"""A host "outside" the worker: its own network namespace, routed from this host by a veth,
with documentation (198.18.0.0/15) and link-local addresses, each served by a TCP echo
server. What a job with ``network: true`` should reach, or be refused, as a plain host would
reach it. The ``outside`` fixture (conftest.py) makes one per test module."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

PYTHON = "/usr/bin/python3"  # readable by the unprivileged uid, unlike a venv under /root
NOBODY = "65534"
ECHO_PORT = 7777
OUTSIDE = "198.18.0.2"  # an ordinary destination
CONTROL_PLANE = "198.18.0.3"  # served outside too, but blocked by the worker
LINK_LOCAL = "169.254.77.77"  # routed to the outside like a metadata service would be
HOST_END = "198.18.0.1"  # the host's address on the outside's link

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
    assert done.returncode == 0, f"{command}: {done.stderr}"
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
            f"addr add {LINK_LOCAL}/32 dev eth0\nlink set eth0 up\nlink set lo up\n"
        )
        run(*in_namespace(namespace, "ip", "-batch", "-"), stdin=batch)
        run("ip", "-batch", "-", stdin=f"addr add {HOST_END}/24 dev {link}\nlink set {link} up\n")
        run("ip", "route", "add", f"{LINK_LOCAL}/32", "via", OUTSIDE, "dev", link)
        with echo_server(namespace):
            yield namespace
    finally:
        subprocess.run(["ip", "link", "del", link], capture_output=True, check=False)
        subprocess.run(["umount", str(namespace)], check=True)
