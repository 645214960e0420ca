"""``herder apply`` and ``herder export`` with workflows whose tasks run no job: approvals and
waits for a duration, an instant or an event (docs/events.md#waiting-tasks)."""

from __future__ import annotations

from pathlib import Path

from tests.integration.conftest import Herder
from tests.integration.test_apply import ok, refused

JOBS_ONLY = """
jobs:
  - {name: train, runtime: shell, command: ./train.sh}
"""
GATED = (
    JOBS_ONLY
    + """
workflows:
  - name: gated
    params: {at: "2026-12-24T18:00:00+01:00"}
    tasks:
      - {name: train, job: train}
      - name: review
        depends_on: [train]
        approval: {message: "Publish?", timeout_seconds: 172800, on_timeout: skip}
      - {name: pause, wait: {seconds: 600}, depends_on: [review]}
      - {name: until, wait: {until: params.at}, depends_on: [pause]}
      - name: ready
        depends_on: [until]
        wait:
          event: {name: dataset.ready, filter: "payload.table == 'sales'"}
          timeout_seconds: 86400
          on_timeout: succeed
"""
)


def write(directory: Path, name: str, text: str) -> str:
    path = directory / name
    path.write_text(text)
    return str(path)


def test_a_workflow_of_waits_and_an_approval_applies_and_round_trips(
    herder: Herder, tmp_path: Path
) -> None:
    gated = write(tmp_path, "gated.yaml", GATED)
    assert "+ workflow gated" in ok(herder("apply", "-f", gated))
    assert "nothing to change" in ok(herder("apply", "-f", gated))

    exported = tmp_path / "exported.yaml"
    ok(herder("export", "-o", str(exported)))
    assert "approval:" in exported.read_text()
    assert "nothing to change" in ok(herder("apply", "-f", str(exported), "--dry-run"))
    assert "nothing to change" in ok(herder("apply", "-f", str(exported), "--prune"))


def test_a_jobs_only_file_applies_beside_a_workflow_of_waits(
    herder: Herder, tmp_path: Path
) -> None:
    ok(herder("apply", "-f", write(tmp_path, "gated.yaml", GATED)))
    jobs = write(tmp_path, "jobs.yaml", JOBS_ONLY)
    assert "nothing to change" in ok(herder("apply", "-f", jobs, "--dry-run"))
    assert "nothing to change" in ok(herder("apply", "-f", jobs, "--prune"))

    none = write(tmp_path, "none.yaml", "jobs: []\n")
    assert "workflow 'gated' on the server runs job 'train', which --prune would delete" in refused(
        herder("apply", "-f", none, "--prune", "--dry-run")
    )
