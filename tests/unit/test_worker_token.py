"""The worker token reaches the worker only from the environment or a private file, never
from the command line (which every process on the host can read in /proc/PID/cmdline)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import herder.worker.agent
from herder.cli import common
from herder.cli.common import app


class CapturedAgent:
    configs: list[Any] = []

    def __init__(self, config: Any) -> None:
        self.configs.append(config)

    async def run(self, stop: Any) -> None:
        """Registers nowhere: the test only wants the configuration."""


@pytest.fixture(autouse=True)
def captured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(herder.worker.agent, "Agent", CapturedAgent)
    monkeypatch.delenv("HERDER_WORKER_TOKEN", raising=False)
    monkeypatch.setattr(common.err, "width", 250)  # a long tmp_path (xdist's) on one line


def _worker(tmp_path: Path, *extra: str) -> Any:
    arguments = ["worker", "--server", "http://127.0.0.1:1", "--home", str(tmp_path / "w")]
    return CliRunner().invoke(app, [*arguments, *extra])


def _token_file(tmp_path: Path, mode: int) -> Path:
    path = tmp_path / "worker-token"
    path.write_text("wtk_1.secret\n")
    path.chmod(mode)
    return path


def test_the_token_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERDER_WORKER_TOKEN", "wtk_1.from-env")
    result = _worker(tmp_path)
    assert result.exit_code == 0, result.output
    assert CapturedAgent.configs[-1].token == "wtk_1.from-env"


@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_the_token_comes_from_a_private_file(tmp_path: Path, mode: int) -> None:
    result = _worker(tmp_path, "--token-file", str(_token_file(tmp_path, mode)))
    assert result.exit_code == 0, result.output
    assert CapturedAgent.configs[-1].token == "wtk_1.secret"


def test_there_is_no_token_option(tmp_path: Path) -> None:
    result = _worker(tmp_path, "--token", "wtk_1.secret")
    assert result.exit_code != 0
    assert "No such option" in result.output


def test_without_a_token_the_worker_says_where_to_put_one(tmp_path: Path) -> None:
    result = _worker(tmp_path)
    assert result.exit_code == 1
    assert "HERDER_WORKER_TOKEN or --token-file" in result.output


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o602])
def test_a_token_file_others_may_read_or_change_is_refused(tmp_path: Path, mode: int) -> None:
    result = _worker(tmp_path, "--token-file", str(_token_file(tmp_path, mode)))
    assert result.exit_code == 1
    assert "chmod 600" in result.output
    assert "wtk_1.secret" not in result.output


def test_a_symlinked_token_file_is_not_followed(tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(_token_file(tmp_path, 0o600))
    result = _worker(tmp_path, "--token-file", str(link))
    assert result.exit_code == 1
    assert "cannot use" in result.output


def test_a_token_file_must_be_a_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    result = _worker(tmp_path, "--token-file", str(fifo))
    assert result.exit_code == 1
    assert "not a regular file" in result.output


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the file to another user")
def test_a_token_file_of_another_user_is_refused(tmp_path: Path) -> None:
    path = _token_file(tmp_path, 0o600)
    os.chown(path, 65534, 65534)
    result = _worker(tmp_path, "--token-file", str(path))
    assert result.exit_code == 1
    assert "owned by uid 65534" in result.output


def test_registry_credentials_come_only_from_a_private_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Image registries' passwords are kept as the token is: a file others cannot read."""
    monkeypatch.setenv("HERDER_WORKER_TOKEN", "wtk_1.from-env")
    credentials = tmp_path / "registries.json"
    credentials.write_text('{"https://registry.internal": {"username": "u", "password": "p4ss"}}')
    monkeypatch.setenv("HERDER_IMAGE_REGISTRY_CREDENTIALS_FILE", str(credentials))
    credentials.chmod(0o644)
    refused = _worker(tmp_path)
    assert refused.exit_code != 0
    assert "HERDER_IMAGE_REGISTRY_CREDENTIALS_FILE" in refused.output
    credentials.chmod(0o600)
    result = _worker(tmp_path)
    assert result.exit_code == 0, result.output
    assert CapturedAgent.configs[-1].image_credentials["https://registry.internal"].username == "u"
    credentials.write_text('{"https://registry.internal": "p4ss"}')
    malformed = _worker(tmp_path)
    assert malformed.exit_code != 0
    assert "p4ss" not in malformed.output


@pytest.mark.parametrize("given", ["0", "-5", "ten", "1.5"])
def test_an_image_cache_bound_that_is_no_whole_number_stops_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    monkeypatch.setenv("HERDER_WORKER_TOKEN", "wtk_1.from-env")
    monkeypatch.setenv("HERDER_IMAGE_CACHE_MB", given)
    result = _worker(tmp_path)
    assert result.exit_code != 0
    assert "HERDER_IMAGE_CACHE_MB" in result.output
