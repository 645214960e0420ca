"""scripts/gpu-check.sh where there is no GPU: it says so with its own exit code; and with a
fake ``nvidia-smi`` (the tests' fake device): the worker discovers its GPUs, the gpus: 1 job
is given one, the gpus: 0 job none, and the checks a real device alone can pass fail."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.system

SCRIPT = Path(__file__).parents[2] / "scripts" / "gpu-check.sh"
NO_GPU = 2
FAKE_NVIDIA_SMI = """#!/bin/sh
[ "$1" = -L ] || exit 9
echo 'GPU 0: NVIDIA H100 (UUID: GPU-aaaa)'
echo 'GPU 1: NVIDIA H100 (UUID: GPU-bbbb)'
"""


def gpu_check(path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT)], env={**os.environ, "PATH": path, "CHECK_SECONDS": "300"},
        capture_output=True, text=True, timeout=360, check=False,
    )  # fmt: skip


def test_without_a_gpu_it_says_so_and_exits_2(tmp_path: Path) -> None:
    without = ":".join(
        directory for directory in os.environ["PATH"].split(":")
        if not (Path(directory) / "nvidia-smi").exists()
    )  # fmt: skip
    checked = gpu_check(without)
    assert checked.returncode == NO_GPU
    assert "no NVIDIA GPU here" in checked.stdout


def test_with_a_fake_gpu_it_runs_both_jobs_and_fails_what_only_a_device_passes(
    tmp_path: Path,
) -> None:
    (tmp_path / "nvidia-smi").write_text(FAKE_NVIDIA_SMI)
    (tmp_path / "nvidia-smi").chmod(0o755)
    checked = gpu_check(f"{tmp_path}:{os.environ['PATH']}")
    lines = checked.stdout.splitlines()
    assert checked.returncode == 1, checked.stdout
    for passed in (
        "it discovered the host's 2",
        "the gpus: 1 job succeeded",
        "CUDA_VISIBLE_DEVICES names one device ('0')",
        "the gpus: 0 job succeeded",
        "CUDA_VISIBLE_DEVICES is set and empty",
        "its /dev holds no GPU's file",
    ):
        assert f"  PASS  {passed}" in lines, checked.stdout
    assert "  FAIL  nvidia-smi -L in the sandbox lists one GPU" in lines  # no device here
    assert "gpu-check: 3 check(s) FAILED" in lines
    leftovers = subprocess.run(["pgrep", "-f", "herder-gpu-check"], check=False)
    assert leftovers.returncode == 1, "a process of the check outlived it"
