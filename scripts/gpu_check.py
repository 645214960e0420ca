"""The checks of scripts/gpu-check.sh, against a running ``herder up``: its local worker
offers the host's GPUs, a gpus: 1 job sees exactly its device, a gpus: 0 job sees none.

Usage: gpu_check.py URL HOME HERDER_PID. Exit 0 when every check passed, else 1.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from herder.client import HerderClient
from herder.client.errors import ServerUnreachable

START_SECONDS = 120.0  # herder up builds the sandbox launcher on its first start
RUN_SECONDS = 180.0
# What a job prints: its CUDA_VISIBLE_DEVICES, its /dev/nvidiaN files, its nvidia-smi -L.
PROBE = (
    'echo "CUDA_VISIBLE_DEVICES=[${CUDA_VISIBLE_DEVICES-unset}]"; '
    "echo \"devices=[$(ls /dev | grep -E '^nvidia[0-9]+$' | tr '\\n' ' ')]\"; "
    "echo 'nvidia-smi -L:'; "
    'if command -v nvidia-smi >/dev/null; then nvidia-smi -L 2>&1 || echo "(exit $?)"; '
    "else echo '(nvidia-smi not found in the sandbox)'; fi"
)
UUID = re.compile(r"\(UUID: ([^)]+)\)")


@dataclass(frozen=True)
class Seen:
    """What one job's sandbox showed it."""

    visible: str
    devices: list[str]
    gpu_lines: list[str]

    @classmethod
    def parse(cls, text: str) -> Seen:
        visible = re.search(r"^CUDA_VISIBLE_DEVICES=\[(.*)\]$", text, re.MULTILINE)
        devices = re.search(r"^devices=\[(.*)\]$", text, re.MULTILINE)
        return cls(
            visible=visible.group(1) if visible else "unset",
            devices=devices.group(1).split() if devices else [],
            gpu_lines=[line for line in text.splitlines() if line.startswith("GPU ")],
        )


class Checks:
    def __init__(self) -> None:
        self.failed = 0

    def expect(self, passed: bool, what: str) -> None:
        print(f"  {'PASS' if passed else 'FAIL'}  {what}")
        self.failed += not passed


def uuid_of(line: str) -> str | None:
    found = UUID.search(line)
    return found.group(1) if found else None


def host_gpus() -> list[str]:
    listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
    return [line for line in listing.stdout.splitlines() if line.startswith("GPU ")]


def ready_client(url: str, home: Path, herder_pid: int) -> HerderClient:
    """An admin's client once ``herder up`` answers and its worker has registered."""
    deadline = time.monotonic() + START_SECONDS
    client: HerderClient | None = None
    while time.monotonic() < deadline:
        try:
            os.kill(herder_pid, 0)
        except ProcessLookupError:
            raise SystemExit("gpu-check: FAILED: herder up exited before it was ready") from None
        credentials = home / "client.json"
        if client is None and credentials.exists():
            client = HerderClient(url, json.loads(credentials.read_text())["api_key"])
        try:
            if client is not None and client.list_workers():
                return client
        except (OSError, ServerUnreachable):
            pass  # not listening yet: it writes client.json before it listens
        time.sleep(0.2)
    raise SystemExit(f"gpu-check: FAILED: no worker registered within {START_SECONDS:.0f}s")


def run_probe(client: HerderClient, gpus: int) -> tuple[str, str]:
    """The probe as a job asking for ``gpus``: its run's end state and its output."""
    job = client.create_job(
        f"gpu-check-{gpus}",
        {
            "runtime": "shell",
            "command": PROBE,
            "resources": {"cpu": 0.1, "memory_mb": 128, "gpus": gpus},
        },
    )
    run = client.wait(client.start_run(job.id).id, timeout=RUN_SECONDS)
    text = "".join(chunk.text for chunk in client.logs(run.id).chunks)
    print(f"== the job with gpus: {gpus} ({run.state}), as its sandbox saw it")
    print(text.rstrip())
    return run.state, text


def main(url: str, home: Path, herder_pid: int) -> int:
    host = host_gpus()
    checks = Checks()
    with ready_client(url, home, herder_pid) as client:
        (worker,) = client.list_workers()
        print(f"== the worker {worker.name} offers {worker.capacity.gpus} GPU(s)")
        checks.expect(worker.capacity.gpus == len(host), f"it discovered the host's {len(host)}")

        state, text = run_probe(client, gpus=1)
        seen = Seen.parse(text)
        checks.expect(state == "succeeded", "the gpus: 1 job succeeded")
        checks.expect(
            re.fullmatch(r"\d+", seen.visible) is not None,
            f"CUDA_VISIBLE_DEVICES names one device ({seen.visible!r})",
        )
        checks.expect(
            seen.devices == [f"nvidia{seen.visible}"],
            f"its /dev holds only that device's file ({seen.devices})",
        )
        checks.expect(len(seen.gpu_lines) == 1, "nvidia-smi -L in the sandbox lists one GPU")
        index = int(seen.visible) if seen.visible.isdigit() else len(host)
        given = uuid_of(host[index]) if index < len(host) else None
        inside = uuid_of(seen.gpu_lines[0]) if seen.gpu_lines else None
        checks.expect(
            given is not None and given == inside,
            f"it is the host's GPU of that index (UUID {inside})",
        )

        state, text = run_probe(client, gpus=0)
        seen = Seen.parse(text)
        checks.expect(state == "succeeded", "the gpus: 0 job succeeded")
        checks.expect(seen.visible == "", "CUDA_VISIBLE_DEVICES is set and empty")
        checks.expect(seen.devices == [], "its /dev holds no GPU's file")
        checks.expect(seen.gpu_lines == [], "nvidia-smi -L in the sandbox lists no GPU")

    verdict = "every check passed" if not checks.failed else f"{checks.failed} check(s) FAILED"
    print(f"gpu-check: {verdict}")
    return 0 if not checks.failed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])))
