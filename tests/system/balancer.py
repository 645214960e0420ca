"""HAProxy, from Debian's package, in front of several API processes: its configuration is made
in a temporary directory, it listens on a free port and sends requests only to backends whose
``/readyz`` answers. Missing, it fails the test under CI and skips it elsewhere."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.system.conftest import free_port, wait_healthy

CONFIGURATION = """\
global
    maxconn 2000
    stats socket {socket} mode 600 level user

defaults
    mode http
    timeout connect 1s
    timeout check 2s  # a busy process is slow, not down
    timeout client 60s
    timeout server 60s  # a worker's claim is a long-poll of 20 s
    retries 3
    option redispatch  # a retry after a refused connection goes to another backend

frontend api
    bind 127.0.0.1:{port}
    default_backend herder

backend herder
    balance roundrobin
    option httpchk GET /readyz
    http-check expect status 200
    default-server inter 300ms fall 2 rise 2
{servers}
"""


STATS_SOCKET = "haproxy.sock"


def backends_up(directory: Path) -> set[str]:
    """The backends (``host:port``) the balancer of ``directory`` sends requests to now: its
    health checks passed, from its stats socket."""
    with socket.socket(socket.AF_UNIX) as stats:
        stats.connect(str(directory / STATS_SOCKET))
        stats.sendall(b"show servers state herder\n")
        answer = b""
        while chunk := stats.recv(65536):
            answer += chunk
    up = set()
    for line in answer.decode().splitlines():
        fields = line.split()
        # be_id be_name srv_id srv_name srv_addr srv_op_state …  srv_port is field 18
        if len(fields) > 18 and not line.startswith("#") and fields[5] == "2":
            up.add(f"{fields[4]}:{fields[18]}")
    return up


def haproxy_binary() -> str:
    found = shutil.which("haproxy") or next(
        (path for path in ("/usr/sbin/haproxy",) if os.access(path, os.X_OK)), None
    )
    if found is None:
        message = "haproxy is not installed (make test-packages installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


@contextmanager
def balancing(backends: list[str], directory: Path) -> Iterator[str]:
    """HAProxy over ``backends`` (``host:port``); its URL, once every backend is up in it."""
    binary = haproxy_binary()
    port = free_port()
    servers = "\n".join(
        f"    server api{index} {address} check" for index, address in enumerate(backends)
    )
    configuration = directory / "haproxy.cfg"
    socket_path = directory / STATS_SOCKET
    configuration.write_text(CONFIGURATION.format(port=port, servers=servers, socket=socket_path))
    checked = subprocess.run(
        [binary, "-c", "-f", str(configuration)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stderr
    process = subprocess.Popen([binary, "-db", "-f", str(configuration)])
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
