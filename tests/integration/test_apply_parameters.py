"""Job parameters as code, on both stores: ``herder apply`` takes a job's ``parameters``
(and a schedule's values for them), refuses a bad declaration naming its place in the file
before any change, and ``herder export`` writes them back so applying the export changes
nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.conftest import Api, Herder
from tests.integration.test_apply import ok, refused

FILES = """\
jobs:
  - name: report
    runtime: shell
    command: ./report.sh "$DAY"
    parameters:
      - {name: REGION, enum: [eu, us], default: eu}
      - {name: DAY, pattern: "[0-9]{4}-[0-9]{2}-[0-9]{2}", description: the day}
      - {name: LIMIT, type: integer, default: 100}
schedules:
  - name: nightly-report
    job: report
    cron: "0 3 * * *"
    overrides: {params: {DAY: "2026-01-01", REGION: us}}
"""


def test_parameters_are_applied_and_exported_unchanged(
    api: Api, herder: Herder, tmp_path: Path
) -> None:
    path = tmp_path / "herder.yaml"
    path.write_text(FILES)
    ok(herder("apply", "-f", str(path)))
    (job,) = api.http.get("/v1/jobs", headers=api.admin).json()["items"]
    assert [parameter["name"] for parameter in job["spec"]["parameters"]] == [
        "REGION", "DAY", "LIMIT",
    ]  # fmt: skip
    assert "+ " not in ok(herder("apply", "-f", str(path), "--dry-run"))
    exported = tmp_path / "exported.yaml"
    ok(herder("export", "-o", str(exported)))
    assert "parameters:" in exported.read_text()
    dry = ok(herder("apply", "-f", str(exported), "--dry-run", "--prune"))
    assert "~ " not in dry
    assert "+ " not in dry
    assert "- " not in dry


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ('"[0-9]{4}-[0-9]{2}-[0-9]{2}"', '"(\\\\d"', "jobs[0].parameters[1].pattern"),
        ("REGION: us}", "REGION: mars}", "schedules[0].overrides.params.REGION"),
        ('DAY: "2026-01-01", ', "", "schedules[0].overrides.params.DAY: parameter DAY is required"),
    ],
)
def test_what_does_not_fit_is_refused_naming_its_place_before_any_change(
    api: Api, herder: Herder, tmp_path: Path, old: str, new: str, field: str
) -> None:
    """A bad declaration, and a schedule's values its job (as the files make it) refuses —
    the check the server makes when the schedule is saved — are refused before any change."""
    path = tmp_path / "herder.yaml"
    path.write_text(FILES.replace(old, new))
    said = refused(herder("apply", "-f", str(path)))
    assert field in " ".join(said.split())
    assert api.http.get("/v1/jobs", headers=api.admin).json()["items"] == []
    assert api.http.get("/v1/schedules", headers=api.admin).json()["items"] == []
