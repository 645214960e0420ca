"""Where the CLI looks for its client file: git's search for ``.git``, unless HERDER_HOME
names the home (docs/configuration.md#cli-and-client)."""

from __future__ import annotations

from pathlib import Path

from herder.credentials import client_file_search, where_the_cli_finds


def test_the_search_goes_up_to_the_root_unless_herder_home_is_set() -> None:
    here = Path("/srv/project/src")
    assert client_file_search({}, here) == (
        Path("/srv/project/src/.herder/client.json"),
        Path("/srv/project/.herder/client.json"),
        Path("/srv/.herder/client.json"),
        Path("/.herder/client.json"),
    )
    assert client_file_search({"HERDER_HOME": "/etc/herder"}, here) == (
        Path("/etc/herder/client.json"),
    )
    assert client_file_search({"HERDER_HOME": "home"}, here) == (
        Path("/srv/project/src/home/client.json"),
    )


def test_herder_up_says_how_the_cli_will_find_its_key() -> None:
    assert where_the_cli_finds(Path("/srv/project/.herder")) == (
        "the CLI finds it from /srv/project and every directory below it"
    )
    assert where_the_cli_finds(Path("/var/lib/herder")) == (
        "the CLI finds it with HERDER_HOME=/var/lib/herder"
    )
