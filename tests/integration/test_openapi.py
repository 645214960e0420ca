"""The OpenAPI document describes every error a route can answer, as a problem document."""

from __future__ import annotations

from tests.integration.openapi import OPENAPI, operations

PUBLIC = {("GET", "/healthz"), ("GET", "/readyz")}
SIGNED = {("POST", "/v1/hooks/{hook_id}")}  # the body's signature is the credential: no roles


def test_every_error_is_a_problem_document() -> None:
    for method, path, operation in operations():
        for status, response in operation["responses"].items():
            if int(status) >= 400:
                assert response["content"] == {
                    "application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}
                }, (method, path, status)
    assert "HTTPValidationError" not in OPENAPI["components"]["schemas"]


def test_every_route_documents_what_it_can_answer() -> None:
    for method, path, operation in operations():
        statuses = set(operation["responses"])
        assert "422" in statuses, (method, path)
        if (method, path) in SIGNED:
            assert {"401", "429", "503"} <= statuses, (method, path)
        elif (method, path) not in PUBLIC:
            assert {"401", "403", "503"} <= statuses, (method, path)
        if "{" in path:
            assert "404" in statuses, (method, path)
        if "requestBody" in operation:
            assert {"400", "413"} <= statuses, (method, path)
    submit = OPENAPI["paths"]["/v1/jobs/{job_id}/runs"]["post"]["responses"]
    assert {"409", "429"} <= set(submit)
    assert "Retry-After" in submit["429"]["headers"]
