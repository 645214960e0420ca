"""A NUL character anywhere in a request is refused with 422 naming where, on both stores,
and nothing is stored. The cases are generated from the OpenAPI document: every path
parameter, every query parameter and every string (value or key) of every JSON body."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

from tests.integration.conftest import Api
from tests.integration.openapi import operations, resolve

NUL_TEXT = "a\x00b"
Case = tuple[str, str, str, dict[str, Any]]  # method, path, field, request keyword arguments


def _string_fields(schema: dict[str, Any], path: str, depth: int = 0) -> Iterator[tuple[str, Any]]:
    """(field, body) pairs: a body holding a NUL at ``field`` and nothing else."""
    schema = resolve(schema)
    if depth > 6:
        return
    for option in schema.get("anyOf", []) + schema.get("allOf", []):
        yield from _string_fields(option, path, depth + 1)
    kind = schema.get("type")
    if kind == "string":
        yield path, NUL_TEXT
    elif kind == "array":
        for field, item in _string_fields(schema.get("items", {}), f"{path}.0", depth + 1):
            yield field, [item]
    elif kind == "object" or "properties" in schema:
        for name, child in schema.get("properties", {}).items():
            for field, value in _string_fields(child, f"{path}.{name}", depth + 1):
                yield field, {name: value}
        extra = schema.get("additionalProperties")
        if extra:
            yield path or "body", {NUL_TEXT: "x"}  # a key
            values = extra if isinstance(extra, dict) and extra else {"type": "string"}
            for field, value in _string_fields(values, f"{path}.KEY", depth + 1):
                yield field, {"KEY": value}


def _url(template: str, names: list[str], nul_in: str | None) -> str:
    for name in names:
        value = NUL_TEXT if name == nul_in else "x"
        template = template.replace(f"{{{name}}}", quote(value, safe=""))
    return template


def _cases() -> Iterator[Case]:
    for method, template, operation in operations():
        parameters = operation.get("parameters", [])
        names = [parameter["name"] for parameter in parameters if parameter["in"] == "path"]
        for parameter in parameters:
            name, where = parameter["name"], parameter["in"]
            if where == "path":
                yield method, _url(template, names, name), name, {}
            elif where == "query":
                yield method, _url(template, names, None), name, {"params": {name: NUL_TEXT}}
            elif where == "header":
                yield method, _url(template, names, None), name, {"headers": {name: NUL_TEXT}}
        content = operation.get("requestBody", {}).get("content", {})
        if "application/json" in content:
            for field, body in _string_fields(content["application/json"]["schema"], ""):
                url = _url(template, names, None)
                yield method, url, field.lstrip(".") or "body", {"json": body}


CASES = list(_cases())


def test_a_nul_anywhere_is_refused_with_422_naming_where(api: Api) -> None:
    """One test per store over every case (a fresh PostgreSQL database per case would
    cost half a minute); a failure lists every case that went wrong."""
    wrong = []
    for method, path, field, request_args in CASES:
        arguments = dict(request_args)
        headers = {**api.admin, **arguments.pop("headers", {})}
        response = api.http.request(method, path, headers=headers, **arguments)
        problem = response.json()
        if (
            response.status_code != 422
            or response.headers["content-type"] != "application/problem+json"
            or problem["errors"] != [{"field": field, "message": problem["detail"]}]
        ):
            wrong.append(f"{method} {path} {field}: {response.status_code} {response.text}")
    assert not wrong, "\n".join(wrong)
    assert len(CASES) > 100
    tenants = api.http.get("/v1/tenants", headers=api.admin).json()["items"]
    assert len(tenants) == 1  # the system tenant only
    assert api.http.get("/v1/jobs", headers=api.admin).json()["items"] == []


def test_every_input_of_every_route_is_covered() -> None:
    """Guards the generator: a route with a parameter or a JSON body yields a case for each
    parameter and at least one body field."""
    covered = {(method, field) for method, _, field, _ in CASES}
    for method, _, operation in operations():
        for parameter in operation.get("parameters", []):
            field = parameter["name"]
            assert (method, field) in covered, (method, operation["operationId"], field)
    bodies = [
        operation["operationId"]
        for _, _, operation in operations()
        if "application/json" in operation.get("requestBody", {}).get("content", {})
    ]
    assert len(bodies) >= 15, bodies


def test_a_route_that_reads_no_input_ignores_a_nul_as_it_ignores_the_rest(api: Api) -> None:
    """/healthz documents no 422: a probe's stray query string cannot make it answer one."""
    response = api.http.get("/healthz", params={"probe": NUL_TEXT})
    assert response.status_code == 200, response.text
    refused = api.http.get("/v1/jobs", headers=api.admin, params={"probe": NUL_TEXT})
    assert refused.status_code == 422  # a route with input refuses it anywhere


def test_a_nul_in_a_valid_request_stores_nothing(api: Api) -> None:
    body = {"name": "ok", "runtime": "shell", "command": "echo", "env": {"A": NUL_TEXT}}
    assert api.http.post("/v1/jobs", headers=api.admin, json=body).status_code == 422
    job = api.create_job()
    response = api.http.post(
        f"/v1/jobs/{job['id']}/runs", headers=api.admin, json={"args": [NUL_TEXT]}
    )
    assert response.status_code == 422
    assert response.json()["field"] == "args.0"
    jobs = api.http.get("/v1/jobs", headers=api.admin).json()["items"]
    assert [item["id"] for item in jobs] == [job["id"]]
    assert api.http.get("/v1/runs", headers=api.admin).json()["items"] == []


def test_a_nul_in_an_artifact_file_name_is_refused(api: Api) -> None:
    body = (  # by hand: httpx would percent-encode the NUL in the file name
        b'--B\r\nContent-Disposition: form-data; name="file"; filename="a\x00b.py"\r\n'
        b"Content-Type: application/octet-stream\r\n\r\nprint(1)\r\n--B--\r\n"
    )
    headers = {**api.admin, "Content-Type": "multipart/form-data; boundary=B"}
    response = api.http.post("/v1/artifacts", headers=headers, content=body)
    assert response.status_code == 422, response.text
    assert response.json()["field"] == "file"


def test_binary_artifacts_may_hold_nul_bytes(api: Api) -> None:
    files = {"file": ("program.bin", b"\x7fELF\x00\x00", "application/octet-stream")}
    response = api.http.post("/v1/artifacts", headers=api.admin, files=files)
    assert response.status_code == 201, response.text


def test_a_nul_deep_in_a_nested_body_is_refused_without_a_server_error(api: Api) -> None:
    deep = "[" * 5000 + '"a\\u0000b"' + "]" * 5000
    headers = {**api.admin, "Content-Type": "application/json"}
    response = api.http.post("/v1/jobs", headers=headers, content=deep)
    assert response.status_code == 422, response.text


def _surrogated(value: Any) -> Any:
    """The body with its NUL text a lone surrogate instead."""
    if isinstance(value, str):
        return value.replace("\x00", "\ud800")
    if isinstance(value, list):
        return [_surrogated(item) for item in value]
    if isinstance(value, dict):
        return {_surrogated(key): _surrogated(item) for key, item in value.items()}
    return value


def test_a_lone_surrogate_in_any_json_body_is_refused_as_a_nul_is(api: Api) -> None:
    """JSON can spell half a UTF-16 pair (``"\\ud800"``); no UTF-8 text can hold it: it was a
    500 where PostgreSQL, a log or an environment met it. A whole pair (an emoji) is text."""
    wrong = []
    bodies = [case for case in CASES if "json" in case[3]]
    for method, path, field, request_args in bodies:
        body = json.dumps(_surrogated(request_args["json"]))  # as \ud800: ASCII JSON
        headers = {**api.admin, "Content-Type": "application/json"}
        response = api.http.request(method, path, headers=headers, content=body)
        if response.status_code != 422 or response.json()["errors"][0]["field"] != field:
            wrong.append(f"{method} {path} {field}: {response.status_code} {response.text}")
    assert not wrong, "\n".join(wrong)
    assert len(bodies) > 50
    sent = api.http.post(
        "/v1/events", headers=api.admin, json={"name": "push", "payload": {"by": "\U0001f600"}}
    )
    assert sent.status_code == 201, sent.text
