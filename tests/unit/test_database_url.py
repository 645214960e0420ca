"""The store's URL as a user gives it: plain ``postgresql://`` and libpq's multi-host form."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import make_url

from herder.home import sqlite_path
from herder.store.database import normalize_url


def test_a_plain_postgresql_url_uses_psycopg() -> None:
    assert normalize_url("postgresql://h:5432/herder") == "postgresql+psycopg://h:5432/herder"


@pytest.mark.parametrize("scheme", ["postgresql", "postgres", "postgresql+psycopg"])
def test_a_url_listing_hosts_the_libpq_way_keeps_every_host_and_parameter(scheme: str) -> None:
    given = f"{scheme}://herder:s3cret@a:5432,b:5433/herder?target_session_attrs=read-write"
    url = make_url(normalize_url(given))
    assert url.drivername == "postgresql+psycopg"
    assert (url.username, url.password, url.database) == ("herder", "s3cret", "herder")
    assert url.query == {"host": ("a:5432", "b:5433"), "target_session_attrs": "read-write"}


def test_hosts_listed_with_no_database_or_parameters() -> None:
    assert make_url(normalize_url("postgresql://a,b")).query == {"host": ("a", "b")}


def test_a_listing_of_hosts_is_no_sqlite_file() -> None:
    assert sqlite_path("postgresql://a:5432,b:5432/herder") is None
    assert sqlite_path("sqlite:///data/herder.db") is not None
