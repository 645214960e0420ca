"""A job's declared parameters on a real server and worker: the values an operator chose
reach the attempt's environment, typed and defaulted; the issue's attack on the same job
(``PYTHONWARNINGS`` and ``BROWSER`` from an operator key) starts nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from herder.client import ApiError, HerderClient
from tests.system.conftest import Cluster

pytestmark = pytest.mark.system

# The job shows what it was given as its output, and whether the attack's variables reached it.
SCRIPT = b"""import json, os
names = ["REGION", "COUNT", "DRY_RUN", "PYTHONWARNINGS", "BROWSER"]
json.dump({name: os.environ.get(name) for name in names}, open(os.environ["HERDER_OUTPUT"], "w"))
"""
PARAMETERS = [
    {"name": "REGION", "enum": ["eu", "us"], "default": "eu"},
    {"name": "COUNT", "type": "integer"},
    {"name": "DRY_RUN", "type": "boolean", "default": False},
]


def test_an_operators_parameters_reach_the_job_and_its_attack_starts_nothing(
    isolated_cluster: Cluster, tmp_path: Path
) -> None:
    cluster = isolated_cluster
    script = tmp_path / "job.py"
    script.write_bytes(SCRIPT)
    with cluster.client() as herder:
        herder.set_secret("API_TOKEN", "t0ken")
        artifact = herder.upload_artifact(script)
        job = herder.create_job(
            "report",
            {"runtime": "python", "artifact": artifact.id, "parameters": PARAMETERS,
             "secrets": {"API_TOKEN": "API_TOKEN"}},
        )  # fmt: skip
        operator_key = herder.create_key(role="operator", name="on-call").token
    with HerderClient(cluster.url, operator_key) as operator:
        with pytest.raises(ApiError) as refused:
            operator.start_run(
                job.id,
                env={"PYTHONWARNINGS": "ignore::antigravity.x", "BROWSER": "/bin/sh -c id #%s"},
            )
        assert (refused.value.status, refused.value.field) == (403, "env")
        run = operator.start_run(job.id, params={"REGION": "us", "COUNT": "3"})
        ended = operator.wait(run.id, timeout=60)
        assert [each.id for each in operator.list_runs(job_id=job.id).items] == [run.id]
    assert (ended.state, ended.output) == (
        "succeeded",
        {"REGION": "us", "COUNT": "3", "DRY_RUN": "false", "PYTHONWARNINGS": None,
         "BROWSER": None},
    ), ended.reason  # fmt: skip
