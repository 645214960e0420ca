"""The CLI finds its server as git finds its repository (issue 41, item 8): the variables,
else ``$HERDER_HOME/client.json`` when HERDER_HOME is set, else the nearest
``.herder/client.json`` in the current directory or above it; a found file that is not the
user's own and private is refused or made private, as the server's home is."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from herder.cli import common
from herder.cli.common import app
from herder.client import HerderClient
from herder.credentials import ClientCredentials
from tests.integration.conftest import Api


@pytest.fixture
def bare(monkeypatch: pytest.MonkeyPatch) -> None:
    """No HERDER_* variable, as a newcomer's shell has."""
    for name in ("HERDER_URL", "HERDER_API_KEY", "HERDER_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(common.err, "width", 250)


def herder_in(directory: Path, api: Api | None, *args: str) -> Result:
    """``herder ARGS…`` run from ``directory``, its client talking to ``api``."""

    def connect(url: str, api_key: str, **options: Any) -> HerderClient:
        assert api is not None
        assert url == "http://testserver"
        return HerderClient(url, api_key, http=api.http, **options)

    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(directory)
        patch.setattr(common, "HerderClient", connect)
        return CliRunner().invoke(app, list(args))


def saved(home: Path, api_key: str) -> Path:
    return ClientCredentials("http://testserver", api_key).save(home)


@pytest.mark.usefixtures("bare")
def test_a_command_below_the_directory_herder_up_ran_in_finds_its_server(
    api: Api, tmp_path: Path
) -> None:
    saved(tmp_path / "project" / ".herder", api.admin_key)
    deeper = tmp_path / "project" / "src" / "etl"
    deeper.mkdir(parents=True)
    listed = herder_in(deeper, api, "job", "list", "--json")
    assert listed.exit_code == 0, listed.output


@pytest.mark.usefixtures("bare")
def test_herder_home_when_set_wins_over_a_nearer_directory(
    api: Api, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    saved(tmp_path / "project" / ".herder", "key_01.not-this-one")
    saved(tmp_path / "elsewhere", api.admin_key)
    monkeypatch.setenv("HERDER_HOME", str(tmp_path / "elsewhere"))
    listed = herder_in(tmp_path / "project", api, "job", "list", "--json")
    assert listed.exit_code == 0, listed.output


@pytest.mark.usefixtures("bare")
def test_nothing_found_names_herder_home_and_where_it_looked(tmp_path: Path) -> None:
    refused = herder_in(tmp_path, None, "job", "list")
    assert refused.exit_code == 1
    line = " ".join(refused.output.split())
    assert "no server configured" in line
    assert "HERDER_HOME" in line
    assert f".herder/client.json in {tmp_path} and every directory above it" in line


@pytest.mark.usefixtures("bare")
def test_a_found_file_readable_by_others_is_made_private_and_said_so(
    api: Api, tmp_path: Path
) -> None:
    path = saved(tmp_path / ".herder", api.admin_key)
    path.chmod(0o644)
    path.parent.chmod(0o755)
    listed = herder_in(tmp_path, api, "job", "list", "--json")
    assert listed.exit_code == 0, listed.output
    assert f"made private: {path} was mode 0644, now 0600" in listed.output
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


@pytest.mark.usefixtures("bare")
def test_a_symlinked_client_file_is_refused(tmp_path: Path) -> None:
    real = saved(tmp_path / "real", "key_01.x")
    (tmp_path / "project" / ".herder").mkdir(parents=True, mode=0o700)
    (tmp_path / "project" / ".herder" / "client.json").symlink_to(real)
    refused = herder_in(tmp_path / "project", None, "job", "list")
    assert refused.exit_code == 1
    assert "is a symbolic link" in refused.output


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
@pytest.mark.usefixtures("bare")
def test_another_users_client_file_above_is_refused(tmp_path: Path) -> None:
    """As git refuses a repository of another owner: a file planted in a shared directory
    above (/tmp) would send this user's commands to another's server."""
    path = saved(tmp_path / ".herder", "key_01.planted")
    os.chown(path, 65534, 65534)
    (tmp_path / "mine").mkdir()
    refused = herder_in(tmp_path / "mine", None, "job", "list")
    assert refused.exit_code == 1
    assert "belongs to uid 65534" in refused.output
