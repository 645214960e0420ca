"""Every ``herder`` process pays at start for what it imports, and the system tests start a
hundred of them on a small machine: the CLI and the worker load no store, no SQLAlchemy and
no API server; a scheduler loads no API server; a server on SQLite loads no PostgreSQL
driver. Each check imports in a fresh interpreter, as a process starting would."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import herder.control
import herder.worker

API_SERVER = ("fastapi", "starlette", "uvicorn", "herder.api.app", "herder.server")
SERVER_SIDE = (*API_SERVER, "sqlalchemy", "psycopg", "herder.store", "herder.control")


def loaded_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    return set(json.loads(result.stdout.splitlines()[-1]))


def among(modules: set[str], packages: tuple[str, ...]) -> set[str]:
    """The modules that are one of ``packages`` or inside one."""
    return {
        name
        for name in modules
        if any(name == package or name.startswith(f"{package}.") for package in packages)
    }


def modules_of(package: ModuleType) -> list[str]:
    return [f"{package.__name__}.{found.name}" for found in pkgutil.iter_modules(package.__path__)]


def imports(modules: list[str]) -> str:
    return "\n".join(f"import {name}" for name in modules)


def test_the_cli_and_every_worker_module_load_nothing_of_the_server() -> None:
    started = ["herder.cli", *modules_of(herder.worker)]
    modules = loaded_after(imports(started))
    assert set(started) <= modules
    assert among(modules, SERVER_SIDE) == set()


def test_a_scheduler_loads_no_api_server() -> None:
    started = ["herder.cli", "herder.server_keys", "herder.store.store"]
    started += modules_of(herder.control)
    modules = loaded_after(imports(started))
    assert set(started) <= modules
    assert among(modules, API_SERVER) == set()


def test_a_server_on_sqlite_loads_no_postgresql_driver(tmp_path: Path) -> None:
    modules = loaded_after(
        "import herder.server, herder.control.scheduler\n"
        "from herder.settings import sqlite_url\n"
        "from herder.store.database import Database\n"
        "from herder.store.notifications import listener_for\n"
        f"database = Database(sqlite_url({str(tmp_path / 'herder.db')!r}))\n"
        "assert listener_for(database) is None\n"
        "database.dispose()"
    )
    assert "herder.api.app" in modules
    assert among(modules, ("psycopg", "herder.store.listener")) == set()
