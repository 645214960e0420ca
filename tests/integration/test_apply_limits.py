"""``herder apply`` and ``herder export`` with limits (kind ``Limit``, the ``limits`` section):
made before the jobs that name them, changed in place, pruned after them, written back as
they were declared."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.integration.conftest import Api, Herder
from tests.integration.test_apply import names, ok, refused

FILES = """
limits:
  - name: per-account
    max_running: 1
    strategy: cancel_newest
jobs:
  - name: sync
    runtime: shell
    command: ./sync.sh
    parameters: [{name: account}]
    limits: [{limit: per-account, key: "{params.account}"}]
"""


def test_apply_makes_limits_before_the_jobs_that_name_them_and_export_writes_them_back(
    api: Api, herder: Herder, tmp_path: Path
) -> None:
    path = tmp_path / "herder.yaml"
    path.write_text(FILES)
    first = ok(herder("apply", "-f", str(path)))
    assert "+ limit per-account" in first
    assert names(api, "limits") == ["per-account"]
    again = ok(herder("apply", "-f", str(path)))
    assert "limit per-account" not in again
    path.write_text(FILES.replace("max_running: 1", "max_running: 2"))
    ok(herder("apply", "-f", str(path)))
    limit = api.http.get("/v1/limits/per-account", headers=api.admin).json()
    assert limit["max_running"] == 2
    exported = yaml.safe_load(ok(herder("export")))
    assert exported["limits"] == [
        {"name": "per-account", "max_running": 2, "strategy": "cancel_newest"}
    ]
    assert exported["jobs"][0]["limits"] == [{"limit": "per-account", "key": "{params.account}"}]
    path.write_text("limits: []\njobs: []\n")
    ok(herder("apply", "-f", str(path), "--prune"))
    assert names(api, "limits") == []


def test_a_limit_that_bounds_nothing_is_refused_naming_its_place(
    herder: Herder, tmp_path: Path
) -> None:
    path = tmp_path / "herder.yaml"
    path.write_text("limits:\n  - name: nothing\n    description: bounds nothing\n")
    said = refused(herder("apply", "-f", str(path)))
    assert "limits[0]" in said
    assert "bounds something" in said


def test_a_limit_named_but_nowhere_or_pruned_from_under_its_job_is_refused_before_any_change(
    api: Api, herder: Herder, tmp_path: Path
) -> None:
    path = tmp_path / "herder.yaml"
    path.write_text(FILES.replace("limits:\n  - name: per-account", "limits:\n  - name: other"))
    said = refused(herder("apply", "-f", str(path)))
    assert (
        "jobs[0].limits[0].limit: no limit named 'per-account' in the files or on the server"
        in said
    )
    assert names(api, "limits") == []
    assert names(api, "jobs") == []

    path.write_text(FILES)
    ok(herder("apply", "-f", str(path)))
    path.write_text("limits: []\n")
    said = refused(herder("apply", "-f", str(path), "--prune"))
    assert "job 'sync' on the server names limit 'per-account', which --prune would delete" in said
    assert names(api, "limits") == ["per-account"]
