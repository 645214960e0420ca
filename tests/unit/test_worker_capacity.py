"""What a worker says about itself when it registers: GPUs, address, labels, options."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import herder.worker.agent
from herder.cli.common import app
from herder.domain.jobs import Capacity, JobSpec, Runtime
from herder.domain.models import Assignment
from herder.worker.address import local_address
from herder.worker.capacity import detect_capacity, detect_gpus
from herder.worker.sandbox import attempt_environment

NVIDIA_SMI_L = """\
GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa)
GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-bbbb)
  MIG 1g.10gb Device 0: (UUID: MIG-cccc)
"""


def fake_nvidia_smi(directory: Path, script: str, monkeypatch: pytest.MonkeyPatch) -> None:
    tool = directory / "nvidia-smi"
    tool.write_text(f"#!/bin/sh\n{script}\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(directory))


@pytest.mark.parametrize(
    ("script", "gpus"),
    [
        (f"[ \"$1\" = -L ] && printf '%s' '{NVIDIA_SMI_L}'", 2),  # MIG lines are not GPUs
        ("echo 'NVIDIA-SMI has failed' >&2; exit 9", 0),  # driver not loaded
        ("exit 0", 0),
    ],
)
def test_gpus_are_counted_from_nvidia_smi(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str, gpus: int
) -> None:
    fake_nvidia_smi(tmp_path, script, monkeypatch)
    assert detect_gpus() == gpus


def test_no_nvidia_smi_means_no_gpus_and_a_declared_count_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert detect_gpus() == 0
    assert detect_capacity(cpu=1, memory_mb=512, gpus=4) == Capacity(cpu=1, memory_mb=512, gpus=4)


def test_the_address_is_the_interface_towards_the_server() -> None:
    assert local_address("http://127.0.0.1:8080") == "127.0.0.1"
    assert local_address("https://localhost") in ("127.0.0.1", "::1")


def test_without_a_route_the_address_is_the_host_name() -> None:
    assert local_address("http://no-such-host.invalid:8080") == socket.gethostname()
    assert local_address("not a url") == socket.gethostname()


def test_the_attempt_environment_names_its_gpus_and_gang() -> None:
    spec = JobSpec(runtime=Runtime.SHELL, command="true", env={"CUDA_VISIBLE_DEVICES": "0"})
    given = Assignment(
        attempt_id="att_1",
        attempt=2,
        run_id="run_1",
        tenant_id="ten_1",
        idempotency_key="key",
        spec=spec,
        gpu_indices=[0, 2],
        rank=1,
        world_size=2,
        peers=["a.example", "b.example"],
    )
    env = attempt_environment(given, Path("/w"), Path("/tmp"))
    assert {key: env[key] for key in env if key.startswith(("CUDA", "HERDER"))} == {
        "CUDA_VISIBLE_DEVICES": "0,2",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "HERDER_RUN_ID": "run_1",
        "HERDER_ATTEMPT": "2",
        "HERDER_ATTEMPT_ID": "att_1",
        "HERDER_IDEMPOTENCY_KEY": "key",
        "HERDER_RANK": "1",
        "HERDER_WORLD_SIZE": "2",
        "HERDER_PEERS": "a.example,b.example",
        "HERDER_OUTPUT": "/w/.herder-output.json",
    }
    alone = attempt_environment(
        given.model_copy(update={"gpu_indices": []}), Path("/w"), Path("/tmp")
    )
    assert alone["CUDA_VISIBLE_DEVICES"] == ""  # set, and empty: no GPU, not every GPU


class CapturedAgent:
    configs: list[Any] = []

    def __init__(self, config: Any) -> None:
        self.configs.append(config)

    async def run(self, stop: Any) -> None:
        """Registers nowhere: the test only wants the configuration."""


def test_the_worker_command_passes_address_labels_and_gpus_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(herder.worker.agent, "Agent", CapturedAgent)
    monkeypatch.setenv("HERDER_WORKER_TOKEN", "t")
    arguments = ["worker", "--server", "http://127.0.0.1:1"]
    arguments += ["--home", str(tmp_path), "--cpu", "2", "--memory-mb", "1024", "--gpus", "3"]
    arguments += ["--label", "gpu_model=h100", "--label", "zone=b", "--address", "10.9.8.7"]
    result = CliRunner().invoke(app, arguments)
    assert result.exit_code == 0, result.output
    config = CapturedAgent.configs[-1]
    assert config.address == "10.9.8.7"
    assert config.labels == {"gpu_model": "h100", "zone": "b"}
    assert config.capacity == Capacity(cpu=2, memory_mb=1024, gpus=3)


def test_a_label_without_a_value_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(herder.worker.agent, "Agent", CapturedAgent)
    monkeypatch.setenv("HERDER_WORKER_TOKEN", "t")
    arguments = ["worker", "--server", "http://127.0.0.1:1", "--label", "gpu"]
    result = CliRunner().invoke(app, arguments)
    assert result.exit_code == 1
    assert "must look like KEY=VALUE" in result.output
