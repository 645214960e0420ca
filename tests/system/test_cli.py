"""The CLI: tables for people, JSON for scripts, and one clear line when something is wrong.
One ``herder up`` serves the module (no test stops or reconfigures it)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.system.conftest import HERDER, Cluster, free_port

pytestmark = pytest.mark.system


@pytest.fixture(scope="module")
def cluster(start_module_cluster: Callable[..., Cluster]) -> Cluster:
    return start_module_cluster(embedded=True)


def herder(home: Path, *args: str, **environment: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*HERDER, *args],
        env={**os.environ, "HERDER_HOME": str(home), "COLUMNS": "200", **environment},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def assert_one_clear_line(result: subprocess.CompletedProcess[str], words: str) -> None:
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert words in lines[0]


def test_a_job_and_its_run_from_the_command_line(cluster: Cluster, tmp_path: Path) -> None:
    script = tmp_path / "hello.py"
    script.write_text("print('Hello World!')\n")
    created = herder(cluster.home, "job", "create", "hello", "--file", str(script), "--json")
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["spec"]["runtime"] == "python"
    started = herder(cluster.home, "run", "start", "hello", "--wait", "--json")
    run = json.loads(started.stdout)
    assert run["state"] == "succeeded"
    logs = herder(cluster.home, "run", "logs", run["id"], "--follow")
    assert logs.stdout == "Hello World!\n"
    listing = herder(cluster.home, "run", "list")
    assert "succeeded" in listing.stdout
    assert "hello" in herder(cluster.home, "job", "list").stdout
    shown = herder(cluster.home, "run", "show", run["id"])
    assert "queued → running" in shown.stdout


def test_errors_are_one_line_without_a_traceback(cluster: Cluster, tmp_path: Path) -> None:
    down = herder(tmp_path, "job", "list", HERDER_URL=f"http://127.0.0.1:{free_port()}",
                  HERDER_API_KEY="key_x.y")  # fmt: skip
    assert_one_clear_line(down, "cannot reach the Herder server")
    wrong_key = herder(cluster.home, "job", "list", HERDER_API_KEY="key_01.nope")
    assert_one_clear_line(wrong_key, "unknown or revoked API key")
    invalid = herder(cluster.home, "job", "create", "x", "--command", "true", "--timeout", "999999")
    assert_one_clear_line(invalid, "24 h")
    missing = herder(cluster.home, "run", "show", "run_missing")
    assert_one_clear_line(missing, "not found")
    nothing = herder(tmp_path / "empty", "job", "list")
    assert_one_clear_line(nothing, "herder up")
