"""Artifact uploads through the CLI and the client against the in-process API on both
stores: the bytes arrive whole, the caller hears how far the upload has gone, and nothing but
the usual line is printed when the output is not a terminal."""

from __future__ import annotations

import hashlib
from pathlib import Path

from typer.testing import Result

from herder.client import ApiError, HerderClient
from tests.integration.conftest import Api, Herder


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def test_a_large_upload_arrives_whole_and_prints_only_its_line(
    api: Api, herder: Herder, tmp_path: Path
) -> None:
    program = tmp_path / "big.bin"
    data = bytes(range(256)) * (6 * 1024)  # 1.5 MiB: over the size a bar is drawn for
    program.write_bytes(data)
    output = ok(herder("job", "create", "big", "--file", str(program)))
    assert output.startswith("created job big (job_")
    assert output.count("\n") == 1  # no bar on a pipe
    job = api.http.get("/v1/jobs", headers=api.admin, params={"name": "big"}).json()["items"][0]
    artifact_id = job["spec"]["artifact"]
    assert artifact_id == hashlib.sha256(data).hexdigest()
    content = api.http.get(f"/v1/artifacts/{artifact_id}/content", headers=api.admin)
    assert content.content == data


def test_an_upload_reports_its_progress_to_the_caller(api: Api, tmp_path: Path) -> None:
    program = tmp_path / 'odd "name"\\.bin'
    program.write_bytes(b"x" * (200 * 1024 + 7))
    sent: list[tuple[int, int]] = []
    with HerderClient("http://testserver", api.admin_key, http=api.http) as herder:
        artifact = herder.upload_artifact(program, progress=lambda *at: sent.append(at))
    size = program.stat().st_size
    assert artifact.size == size
    assert sent[0] == (0, size)
    assert sent[-1] == (size, size)
    assert [done for done, _ in sent] == sorted(done for done, _ in sent)


def test_an_upload_over_the_limit_is_refused_with_the_limit(herder: Herder, tmp_path: Path) -> None:
    program = tmp_path / "huge.bin"
    program.write_bytes(b"x" * (10 * 1024 * 1024 + 1))
    refused = herder("job", "create", "huge", "--file", str(program))
    assert isinstance(refused.exception, ApiError)
    assert refused.exception.status == 413
