"""A JSON body nested past what the parser can read (100,000 arrays) is the client's error:
a 422 naming the body, nothing stored, never a 500 or a bare 400."""

from __future__ import annotations

import pytest

from tests.integration.conftest import Api

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/jobs", DEEP),
        ("/v1/jobs", '{"name": "j", "runtime": "shell", "command": "x", "args": ' + DEEP + "}"),
        ("/v1/workflows", '{"name": "w", "tasks": [], "params": {"p": ' + DEEP + "}}"),
        ("/v1/runs/batch", '{"runs": ' + DEEP + "}"),
    ],
)
def test_a_body_nested_too_deep_is_a_422_naming_the_body(api: Api, path: str, body: str) -> None:
    headers = {**api.admin, "Content-Type": "application/json"}
    response = api.http.post(path, headers=headers, content=body)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["field"] == "body"
    assert "nested too deeply" in response.json()["detail"]
    assert api.http.get("/v1/jobs", headers=api.admin).json()["items"] == []
    assert api.http.get("/v1/workflows", headers=api.admin).json()["items"] == []
