"""``herder login`` against a real OpenID provider (docs/tenants.md "Single sign-on"): the
device flow's address and code shown, the code approved in the person's own browser
session at the provider, the session saved 0600 and used by the commands that follow
(``whoami``, a listing), then ``herder logout`` ending it on the server."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.oidc_provider.provider import Provider
from tests.system.conftest import HERDER, Cluster
from tests.system.signed_in import server_behind_provider

LOGIN_SECONDS = 60.0


@pytest.fixture(scope="module")
def signed_in_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Cluster, Provider]]:
    with server_behind_provider(tmp_path_factory.mktemp("sso")) as started:
        yield started


def herder(environment: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = [*HERDER, *args]
    return subprocess.run(
        command, check=False, env=environment, capture_output=True, text=True, timeout=LOGIN_SECONDS
    )


def test_a_person_logs_in_from_the_cli(
    signed_in_server: tuple[Cluster, Provider], tmp_path: Path
) -> None:
    cluster, provider = signed_in_server
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("HERDER_API_KEY", "HERDER_HOME")
    }
    environment |= {"XDG_CONFIG_HOME": str(tmp_path / "config"), "HERDER_URL": cluster.url}
    login = subprocess.Popen(
        [*HERDER, "login"], env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, cwd=tmp_path,
    )  # fmt: skip
    try:
        assert login.stderr is not None
        shown = login.stderr.readline()
        code = re.search(r"enter the code (\S+);", shown)
        assert code, shown
        assert f"{provider.issuer}/device/" in shown
        provider.approve_device(code.group(1), "alice", "alice-password")
        out, rest = login.communicate(timeout=LOGIN_SECONDS)
    finally:
        login.kill()
        login.wait()
        for stream in (login.stdout, login.stderr):
            if stream is not None:
                stream.close()
    assert login.returncode == 0, rest
    assert "signed in as alice (admin of ten_" in out
    saved = tmp_path / "config" / "herder" / "session.json"
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600

    whoami = herder(environment, "whoami")
    assert whoami.returncode == 0, whoami.stderr
    assert whoami.stdout.startswith("alice (admin of ten_")
    assert herder(environment, "job", "list").returncode == 0

    token = json.loads(saved.read_text())["token"]
    assert herder(environment, "logout").returncode == 0
    assert not saved.exists()
    ended = httpx.get(f"{cluster.url}/auth/session", headers={"Authorization": f"Bearer {token}"})
    assert ended.status_code == 401  # ended on the server, not only forgotten here
