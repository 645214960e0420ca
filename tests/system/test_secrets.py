"""A secret on a real server and a real worker: the attempt's job sees the value in its
environment, a new value reaches the next attempt, and no answer, log line or file of the
server or the worker ever holds it (sandboxed under ``herder up``, and at isolation none)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path

import httpx
import pytest

from herder.client import ApiError, HerderClient
from tests.system.conftest import Cluster

pytestmark = pytest.mark.system

# The job proves it saw the value without showing it: its output is the value's sha256.
HASH_OF_TOKEN = (
    """printf '"%s"' "$(printf %s "$TOKEN" | sha256sum | cut -d' ' -f1)" > "$HERDER_OUTPUT";"""
    """ echo "TOKEN is ${#TOKEN} characters" """
)


def sha256(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def files_holding(root: Path, needles: list[bytes]) -> list[str]:
    """Every file under ``root`` (the database and its WAL, the worker's home, logs) whose
    bytes contain a needle."""
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                data = path.read_bytes()
            except OSError:
                continue
            found += [str(path) for needle in needles if needle in data]
    return found


def test_a_job_sees_its_secret_a_new_value_reaches_the_next_attempt_and_nothing_leaks(
    capfd: pytest.CaptureFixture[str], isolated_cluster: Cluster
) -> None:
    """``capfd`` first: it hears the server and the worker from their start."""
    cluster = isolated_cluster
    first, second = f"v1-{os.urandom(8).hex()}", f"v2-{os.urandom(8).hex()}"
    with cluster.client() as herder:
        herder.set_secret("API_TOKEN", first)
        job = herder.create_job(
            "uses-token",
            {"runtime": "shell", "command": HASH_OF_TOKEN, "secrets": {"TOKEN": "API_TOKEN"}},
        )
        before = herder.wait(herder.start_run(job.id).id, timeout=60)
        assert (before.state, before.output) == ("succeeded", sha256(first)), before.reason
        herder.set_secret("API_TOKEN", second)
        with pytest.raises(ApiError) as replaced:  # no run may replace a secret's variable
            herder.start_run(job.id, env={"TOKEN": "x"})
        assert (replaced.value.status, replaced.value.field) == (422, "env.TOKEN")
        after = herder.wait(herder.start_run(job.id).id, timeout=60)
        assert (after.state, after.output) == ("succeeded", sha256(second)), after.reason
        answers = _everything_the_api_says(herder, cluster, [before.id, after.id], job.id)
    assert f"TOKEN is {len(first)} characters" in answers  # the logs came through
    needles = [first, second, *(base64.b64encode(v.encode()).decode() for v in (first, second))]
    assert [needle for needle in needles if needle in answers] == []
    assert files_holding(cluster.home, [needle.encode() for needle in needles]) == []
    printed = capfd.readouterr()
    assert "Herder" in printed.out  # the server was heard from its start
    assert [needle for needle in needles if needle in printed.out + printed.err] == []
    key_file = cluster.home / "secrets.key"
    assert key_file.stat().st_mode & 0o777 == 0o600


def _everything_the_api_says(
    herder: HerderClient, cluster: Cluster, run_ids: list[str], job_id: str
) -> str:
    """Every answer about the job and its runs, raw."""
    headers = {"Authorization": f"Bearer {cluster.credentials['api_key']}"}
    paths = [f"/v1/jobs/{job_id}", "/v1/jobs", "/v1/runs", "/v1/secrets", "/v1/queue"]
    for run_id in run_ids:
        paths += [f"/v1/runs/{run_id}", f"/v1/runs/{run_id}/events", f"/v1/runs/{run_id}/logs"]
    answers = [httpx.get(cluster.url + path, headers=headers).text for path in paths]
    logs = [chunk.text for run_id in run_ids for chunk in herder.logs(run_id).chunks]
    return json.dumps(answers) + "".join(logs)
