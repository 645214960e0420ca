"""What a runtime image job costs per run beside a plain sandboxed one.

One server and one root, sandboxing worker (``bench.oneoff.Herder``, SQLite). Each run is
started alone and timed from its submission to ``succeeded`` as the API reports it:

    plain    runtime shell, ``true``, on the host's system directories
    cold     runtime image, ``true``, an image (tests/images.py: busybox, 2 layers, ~2 MB)
             this worker has never run: its archive downloaded, read, its layers stacked
             into a new root; each cold run a different image (its config differs)
    warm     the same image again: the root is there, bound as the attempt's /

    .venv/bin/python -m bench.run --scenario images    (appended to bench/RESULTS.md)
    .venv/bin/python -m bench.images [--runs N]        (printed only)
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.images import busybox_image

from bench.oneoff import Herder
from herder.client import HerderClient
from herder.settings import sqlite_url
from herder.worker.isolation import Isolation

COLD_RUNS = 3
POLL_SECONDS = 0.002


def _timed(client: HerderClient, job_id: str) -> float:
    started = time.monotonic()
    run = client.wait(client.start_run(job_id).id, timeout=120, poll=POLL_SECONDS)
    assert run.state == "succeeded", run.reason
    return time.monotonic() - started


def _job(client: HerderClient, name: str, spec: dict[str, Any]) -> str:
    return client.create_job(name, spec).id


def _image_job(client: HerderClient, directory: Path, name: str) -> str:
    path = directory / f"{name}.tar"
    path.write_bytes(busybox_image(Env=["PATH=/bin", f"IMAGE={name}"]).oci_archive())
    artifact = client.upload_artifact(path).id
    return _job(client, name, {"runtime": "image", "artifact": artifact,
                               "command": shlex.quote("true")})  # fmt: skip


def measure(home: Path, runs: int) -> dict[str, list[float]]:
    """Seconds from submission to success: ``runs`` plain and warm runs, and cold ones."""
    database = sqlite_url(home / "herder.db")
    with Herder(home, database, Isolation.SANDBOX) as herder, herder.client() as client:
        plain = _job(client, "plain", {"runtime": "shell", "command": "true"})
        _timed(client, plain)  # the worker is up, the launcher built
        timings: dict[str, list[float]] = {"plain": [], "cold": [], "warm": []}
        for number in range(COLD_RUNS):
            timings["cold"].append(_timed(client, _image_job(client, home, f"cold-{number}")))
        warm = _image_job(client, home, "warm")
        _timed(client, warm)
        for _ in range(runs):  # interleaved: the box's load falls on both alike
            timings["plain"].append(_timed(client, plain))
            timings["warm"].append(_timed(client, warm))
    return timings


def report(timings: dict[str, list[float]]) -> list[str]:
    medians = {kind: statistics.median(values) * 1000 for kind, values in timings.items()}
    return [
        "runtime image beside a plain sandboxed run (submission → succeeded, medians):",
        f"  plain shell `true`: {medians['plain']:.1f} ms ({len(timings['plain'])} runs)",
        f"  image, warm root:   {medians['warm']:.1f} ms "
        f"(+{medians['warm'] - medians['plain']:.1f} ms; {len(timings['warm'])} runs)",
        f"  image, cold cache:  {medians['cold']:.1f} ms "
        f"(+{medians['cold'] - medians['plain']:.1f} ms: download, read, stack the layers; "
        f"{len(timings['cold'])} images)",
    ]


def section(report_lines: list[str], machine: str, when: str) -> list[str]:
    """The report as bench/RESULTS.md keeps it."""
    return [
        f"\n### Runtime image cost per run, {when} UTC\n",
        f"Machine: {machine}. `python -m bench.run --scenario images`: SQLite, one root "
        "sandboxing worker, each run started alone; cold = an image the worker never ran.\n",
        "```",
        *report_lines,
        "```",
    ]


def run(runs: int = 30) -> list[str]:
    home = Path(tempfile.mkdtemp(prefix="herder-images-"))
    try:
        return report(measure(home, runs))
    finally:
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=30)
    print("\n".join(run(parser.parse_args().runs)))


if __name__ == "__main__":
    main()
