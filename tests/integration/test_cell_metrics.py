"""A cell's own /metrics names its cell (docs/metrics.md): ``herder_cell_info{cell, region} 1``
when its server is started with ``HERDER_CELL`` (and ``HERDER_REGION``), nothing of the kind
outside cells; a name that is no DNS label stops the server from starting, saying which."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from herder.api.app import create_app
from herder.settings import Settings
from herder.store.store import Store
from tests.integration.conftest import Api
from tests.integration.test_metrics import scrape


def test_a_cell_s_metrics_name_the_cell_and_its_region(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERDER_HOME", str(tmp_path))
    monkeypatch.setenv("HERDER_DATABASE_URL", store.database.url)
    monkeypatch.setenv("HERDER_CELL", "cell-a")
    monkeypatch.setenv("HERDER_REGION", "eu-west")
    settings = Settings.from_environment()
    bootstrap = store.access.bootstrap()
    assert bootstrap is not None
    with TestClient(create_app(store, settings)) as http:
        cell = Api(http, store, bootstrap.admin_key, bootstrap.worker_token, bootstrap.tenant.id)
        scraped = scrape(cell)
    info = {
        labels: value for (name, labels), value in scraped.items() if name == "herder_cell_info"
    }
    assert info == {(("cell", "cell-a"), ("region", "eu-west")): 1.0}


def test_a_cell_with_no_region_named_is_in_the_default_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HERDER_CELL", "b")
    monkeypatch.delenv("HERDER_REGION", raising=False)
    settings = Settings.from_environment()
    assert (settings.cell, settings.region) == ("b", "default")


def test_outside_cells_no_cell_is_named(api: Api) -> None:
    assert not [name for name, _ in scrape(api) if name == "herder_cell_info"]


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("HERDER_CELL", "Cell A"),
        ("HERDER_CELL", 'a",evil="1'),  # a label's quoting: refused, never served
        ("HERDER_CELL", "a" * 64),
        ("HERDER_CELL", "a\nherder_runs 9"),  # a line of its own in the exposition
        ("HERDER_CELL", "a\n"),
        ("HERDER_REGION", "-eu"),
        ("HERDER_REGION", "eu\u0000"),
    ],
)
def test_a_name_that_is_no_dns_label_is_refused_naming_the_variable(
    variable: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERDER_CELL", "a")
    if "\u0000" in value:  # no environment holds a NUL: as a process could be given one
        monkeypatch.setattr("os.environ", {"HERDER_CELL": "a", variable: value})
    else:
        monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError, match=f"{variable} is no DNS label"):
        Settings.from_environment()
