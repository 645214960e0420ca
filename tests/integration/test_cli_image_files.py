"""``job create --file`` of an image archive (issue 41, item 10): a ``docker save`` or OCI
archive becomes runtime ``image`` (not ``executable``), a runtime that would run it as a
program is refused saying ``--runtime image``, and a command the image's entrypoint would not
run as meant is warned of on stderr, the job created all the same."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from typer.testing import Result

from tests.images import Image, Member, image_config, layer_tar
from tests.integration.conftest import Api, Herder

LAYERS = [layer_tar([Member("app/hello", b"hello\n")])]
IMAGE = Image(LAYERS, image_config(LAYERS))  # Entrypoint /bin/sh -c


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


def created_runtime(herder: Herder, name: str, path: Path, *options: str) -> str:
    job = json.loads(ok(herder("job", "create", name, "--file", str(path), *options, "--json")))
    assert job["spec"]["artifact"]
    runtime: str = job["spec"]["runtime"]
    return runtime


def test_docker_save_and_oci_archives_become_image_jobs(herder: Herder, tmp_path: Path) -> None:
    (tmp_path / "bb.tar").write_bytes(IMAGE.docker_archive())
    (tmp_path / "oci.tar").write_bytes(IMAGE.oci_archive())
    (tmp_path / "bb.tar.gz").write_bytes(gzip.compress(IMAGE.docker_archive()))
    (tmp_path / "site.tar").write_bytes(layer_tar([Member("manifest.json", b"{}")]))
    assert created_runtime(herder, "saved", tmp_path / "bb.tar") == "image"
    assert created_runtime(herder, "oci", tmp_path / "oci.tar") == "image"
    assert created_runtime(herder, "zipped", tmp_path / "bb.tar.gz") == "image"
    # a manifest.json alone (a browser extension's) is an archive's file, not an image
    assert created_runtime(herder, "site", tmp_path / "site.tar", "--command", "ls") == "archive"


def test_an_image_archive_as_a_program_is_refused_with_the_runtime_to_use(
    api: Api, herder: Herder, tmp_path: Path
) -> None:
    archive = tmp_path / "bb.tar"
    archive.write_bytes(IMAGE.docker_archive())
    refused = herder("job", "create", "bb", "--file", str(archive), "--runtime", "executable")
    assert refused.exit_code == 1
    said = " ".join(refused.stderr.split())
    assert "is an image archive (docker save)" in said
    assert "--runtime image" in said
    assert api.http.get("/v1/jobs", headers=api.admin).json()["items"] == []


def test_a_command_the_entrypoint_would_swallow_is_warned_of(
    herder: Herder, tmp_path: Path
) -> None:
    archive = tmp_path / "bb.tar"
    archive.write_bytes(IMAGE.oci_archive())
    warned = herder("job", "create", "bb", "--file", str(archive), "--command", "echo hi there")
    assert warned.exit_code == 0, warned.output
    assert warned.stdout.startswith("created job bb")
    said = " ".join(warned.stderr.split())
    assert "warning: the image's entrypoint /bin/sh -c runs only the command's first word" in said
    assert "'echo hi there'" in said
    quoted = herder("job", "create", "quoted", "--file", str(archive), "--command", "'echo hi'")
    assert quoted.exit_code == 0, quoted.output
    assert quoted.stderr == ""


def test_shell_syntax_is_warned_of_when_the_entrypoint_is_not_known_here(
    herder: Herder, tmp_path: Path
) -> None:
    unknown = tmp_path / "image.tar"  # no image this CLI can tell: the worker will judge it
    unknown.write_bytes(layer_tar([Member("etc/os-release", b"NAME=test\n")]))
    warned = herder(
        "job", "create", "piped", "--file", str(unknown), "--runtime", "image",
        "--command", "cat /etc/os-release | head -1",
    )  # fmt: skip
    assert warned.exit_code == 0, warned.output
    said = " ".join(warned.stderr.split())
    assert "run without a shell, so '|' reaches the program as a word" in said
    assert "if the image's entrypoint is sh -c" in said
