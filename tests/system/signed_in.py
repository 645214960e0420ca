"""A server that signs people in through a real OpenID provider started for the test
(django-oauth-toolkit, ``tests/oidc_provider``), with a tenant ``acme`` whose admins are the
provider's group ``herder-admins``: the dashboard's and the CLI's sign-in tests share it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from herder.settings import sqlite_url
from tests.oidc_provider.provider import Provider, running_provider
from tests.system.conftest import Cluster, free_port


@contextmanager
def server_behind_provider(directory: Path) -> Iterator[tuple[Cluster, Provider]]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with running_provider(directory, [f"{url}/auth/callback"]) as provider:
        home = directory / "home"
        cluster = Cluster(
            home=home,
            url=url,
            environment={
                **os.environ,
                "HERDER_HOME": str(home),
                "HERDER_DATABASE_URL": sqlite_url(home / "herder.db"),
                "HERDER_OIDC_ISSUER": provider.issuer,
                "HERDER_OIDC_CLIENT_ID": provider.web_client_id,
                "HERDER_OIDC_CLIENT_SECRET": provider.web_secret,
                "HERDER_OIDC_CLI_CLIENT_ID": provider.cli_client_id,
                "HERDER_OIDC_PROVIDER_NAME": "Test provider",
                "HERDER_OIDC_GROUPS": "herder-admins=acme:admin",
            },
            server_args=("server", "--port", str(port)),
        )
        try:
            cluster.start_server()
            with cluster.client() as system_admin:
                system_admin.create_tenant("acme")
            yield cluster, provider
        finally:
            cluster.stop_all()
