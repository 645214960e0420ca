"""Run the test provider: migrate its database, create its people and applications, then serve
on ``OIDC_PROVIDER_PORT`` until killed (``provider.py`` reads the line ``ready``).

People (``PEOPLE``): alice in ``herder-admins``, bob in ``herder-viewers``, mallory in no
group. Applications: Herder's server (``herder-web``, confidential, authorization code),
Herder's CLI (``herder-cli``, public, device code) and another relying party
(``other-app``), whose tokens Herder must refuse."""

from __future__ import annotations

import os
import sys
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

PEOPLE = {
    "alice": ("alice-password", "alice@example.test", ["herder-admins"]),
    "bob": ("bob-password", "bob@example.test", ["herder-viewers"]),
    "mallory": ("mallory-password", "mallory@example.test", []),
}


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def _prepare() -> None:
    from django.contrib.auth.models import Group, User  # type: ignore[import-untyped]
    from django.core.management import call_command  # type: ignore[import-untyped]
    from oauth2_provider.models import Application  # type: ignore[import-untyped]

    call_command("migrate", verbosity=0)
    for name, (password, email, groups) in PEOPLE.items():
        user = User.objects.create_user(name, email=email, password=password)
        for group in groups:
            user.groups.add(Group.objects.get_or_create(name=group)[0])
    redirects = os.environ["OIDC_PROVIDER_REDIRECTS"]
    for client_id, secret_variable in (
        ("herder-web", "OIDC_PROVIDER_WEB_SECRET"),
        ("other-app", "OIDC_PROVIDER_OTHER_SECRET"),
    ):
        Application.objects.create(
            name=client_id,
            client_id=client_id,
            client_secret=os.environ[secret_variable],
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=redirects,
            skip_authorization=True,
            algorithm=Application.RS256_ALGORITHM,
        )
    Application.objects.create(
        name="herder-cli",
        client_id="herder-cli",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_DEVICE_CODE,
        algorithm=Application.RS256_ALGORITHM,
    )


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.oidc_provider.settings")
    import django  # type: ignore[import-untyped]
    from django.core.wsgi import get_wsgi_application  # type: ignore[import-untyped]

    django.setup()
    _prepare()
    server = make_server(
        "127.0.0.1",
        int(os.environ["OIDC_PROVIDER_PORT"]),
        get_wsgi_application(),
        server_class=_ThreadingServer,
        handler_class=_QuietHandler,
    )
    print("ready", flush=True)
    sys.stdout.close()
    server.serve_forever()


if __name__ == "__main__":
    main()
