"""The dashboard's page and files: served whole by the API, with the headers that keep the
page to its own code, beside (never over) the API's own routes. The store plays no part in
serving them: one app on SQLite for the module."""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from herder.api.dashboard.routes import CONTENT_SECURITY_POLICY
from herder.api.dashboard.state_module import PATH as STATES_PATH
from herder.domain.state_tones import RUN_STATES_WORST_FIRST, TONE_OF_NAME
from herder.domain.states import ACTIVE_RUN_STATES, FAILED_RUN_STATES, LIVE_RUN_STATES, RunState
from herder.domain.stats import MAX_MINUTES, Outcome
from herder.domain.workflows.progress import WorkflowRunState
from herder.domain.workflows.repair import DONE_RUN_STATES
from tests.integration.conftest import Api
from tests.integration.one_app import sqlite_app

STATIC = Path(__file__).parents[2] / "src/herder/api/dashboard/static"
IMPORT = re.compile(r"""^import .* from "(\.{1,2}/[^"]+)";$""", re.MULTILINE)
MODULE_SCRIPT = re.compile(r"""<script type="module" src="ui/([^"]+)"></script>""")


@pytest.fixture(scope="module")
def api(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    with sqlite_app(sqlite_template, tmp_path_factory.mktemp("dashboard")) as app:
        yield app


def assert_locked_down(headers: httpx.Headers) -> None:
    assert headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "no-referrer"


def test_the_page_is_at_the_root_and_needs_no_key(api: Api) -> None:
    response = api.http.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert_locked_down(response.headers)
    # boot.js first: it says so on the page when app.js cannot load or start.
    assert MODULE_SCRIPT.findall(response.text) == ["boot.js", "app.js"]
    assert "<script>" not in response.text  # no inline script: the policy would refuse it
    # The key's field has no name: were the script not to run, the form would not send it.
    assert '<input id="api-key" type="password"' in response.text
    assert "http" not in response.text.replace("http-equiv", "")  # nothing from another host


def test_every_module_the_app_imports_is_served(api: Api) -> None:
    """Walks the import graph from the page's scripts as the browser does."""
    seen: set[str] = set()
    pending = MODULE_SCRIPT.findall(api.http.get("/").text)
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        response = api.http.get(f"/ui/{name}")
        assert response.status_code == 200, name
        assert response.headers["content-type"] == "text/javascript; charset=utf-8"
        assert_locked_down(response.headers)
        assert "innerHTML" not in response.text
        assert "insertAdjacentHTML" not in response.text
        assert "eval(" not in response.text
        folder = posixpath.dirname(name)
        for target in IMPORT.findall(response.text):
            pending.append(posixpath.normpath(posixpath.join(folder, target)))
    written = {STATES_PATH}  # from the domain, not a file: test_the_states_module_is_the_domains
    assert {path.relative_to(STATIC).as_posix() for path in STATIC.rglob("*.js")} | written == seen
    for asset in ("style.css", "icon.svg"):
        assert api.http.get(f"/ui/{asset}").status_code == 200


def test_the_states_module_is_the_domains(api: Api) -> None:
    """The scripts' only lists of states, each constant a JSON literal taken from the domain."""
    response = api.http.get(f"/ui/{STATES_PATH}")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/javascript; charset=utf-8"
    assert_locked_down(response.headers)
    constants = {
        name: json.loads(value)
        for name, value in re.findall(r"^export const (\w+) = (.*);$", response.text, re.M)
    }
    assert constants["RUN_STATES"] == list(RunState)
    assert set(constants["ACTIVE_RUN_STATES"]) == ACTIVE_RUN_STATES
    assert constants["RUN_STATES_WORST_FIRST"] == list(RUN_STATES_WORST_FIRST)
    ended = [state for state in WorkflowRunState if state.is_terminal]
    assert constants["ENDED_WORKFLOW_RUN_STATES"] == ended
    assert constants["TONE_OF_STATE"] == TONE_OF_NAME
    assert set(constants["FAILED_RUN_STATES"]) == FAILED_RUN_STATES
    assert constants["LIVE_RUN_STATES"] == [state for state in RunState if state in LIVE_RUN_STATES]
    assert set(constants["REPAIR_DONE_RUN_STATES"]) == DONE_RUN_STATES == {"succeeded", "skipped"}
    assert constants["OUTCOMES"] == list(Outcome) == ["succeeded", "failed", "cancelled"]
    assert constants["ROLES_WEAKEST_FIRST"] == ["viewer", "operator", "developer", "admin"]
    assert constants["STATS_MAX_MINUTES"] == MAX_MINUTES
    code = [line for line in response.text.splitlines() if not line.startswith("//")]
    assert len(code) == len(constants)  # nothing but the constants


@pytest.mark.parametrize(
    "path",
    ["/ui/../routes.py", "/ui/%2e%2e/routes.py", "/ui/..%2f__init__.py", "/ui/index.html",
     "/ui/.hidden.js", "/ui/missing.js", "/ui/views/../../routes.py", "/ui/" + "a" * 5000 + ".js",
     "/ui/app.js%00.py"],
)  # fmt: skip
def test_nothing_else_of_the_package_is_served(api: Api, path: str) -> None:
    response = api.http.get(path)
    assert response.status_code in (404, 422), response.text
    assert response.headers["content-type"] == "application/problem+json"


def test_the_api_routes_beside_it_still_answer(api: Api) -> None:
    assert api.http.get("/healthz").status_code == 200
    assert api.http.get("/readyz").status_code == 200
    assert api.http.get("/docs").status_code == 200
    assert api.http.get("/redoc").status_code == 200
    assert api.http.get("/metrics", headers=api.admin).status_code == 200
    assert api.http.get("/openapi.json").status_code == 200
    assert api.http.get("/v1/jobs").status_code == 401
    assert api.http.get("/v1/jobs", headers=api.admin).status_code == 200
    paths = api.http.get("/openapi.json").json()["paths"]
    assert "/" not in paths
    assert not any(path.startswith("/ui") for path in paths)
