"""Driver errors become domain errors where they enter (the store's connection), on both
stores: a unique key taken is a Conflict, anything else Unavailable; never a raw exception."""

from __future__ import annotations

import pytest
from sqlalchemy import exc, insert, select, text

from herder.domain.errors import Conflict, Unavailable
from herder.store.schema import tenants
from herder.store.store import Store
from tests.integration.conftest import Api


def test_a_unique_key_taken_is_a_conflict(store: Store) -> None:
    store.access.create_tenant("taken")
    with store.database.read() as connection:
        row = connection.execute(select(tenants).where(tenants.c.name == "taken")).one()
    duplicate = {**row._asdict(), "id": "ten_other"}
    with pytest.raises(Conflict) as caught, store.database.write() as connection:
        connection.execute(insert(tenants).values(**duplicate))
    assert isinstance(caught.value.__cause__, exc.IntegrityError)


def test_any_other_driver_error_makes_the_store_unavailable_with_the_cause_kept(
    store: Store,
) -> None:
    with pytest.raises(Unavailable) as caught, store.database.read() as connection:
        connection.execute(text("SELECT * FROM no_such_table"))
    assert isinstance(caught.value.__cause__, exc.DBAPIError)


def test_an_unreachable_database_is_unavailable() -> None:
    store = Store("postgresql://nobody@127.0.0.1:1/none")
    with pytest.raises(Unavailable), store.database.read():
        pass
    store.database.dispose()


def test_renaming_a_job_onto_another_ones_name_is_a_409_naming_the_field(api: Api) -> None:
    api.create_job("first")
    second = api.create_job("second")
    response = api.http.patch(f"/v1/jobs/{second['id']}", headers=api.admin, json={"name": "first"})
    assert response.status_code == 409
    assert response.json()["field"] == "name"
    assert api.http.get(f"/v1/jobs/{second['id']}", headers=api.admin).json()["version"] == 1
