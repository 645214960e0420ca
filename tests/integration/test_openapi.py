"""The OpenAPI document describes every error a route can answer, as a problem document."""

from __future__ import annotations

from tests.integration.openapi import OPENAPI, operations

PUBLIC = {("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/auth/config")}  # before a key
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
        # a parameter, a body or a credential can break a rule; a route taking none cannot
        takes_input = bool(
            operation.get("parameters") or "requestBody" in operation or operation.get("security")
        )
        assert ("422" in statuses) == takes_input, (method, path)
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


def test_health_checks_take_nothing_and_list_no_422() -> None:
    for path in ("/healthz", "/readyz"):
        operation = OPENAPI["paths"][path]["get"]
        assert "422" not in operation["responses"], path
        assert "security" not in operation, path


def test_the_bearer_credentials_are_declared_for_the_docs_authorize_button() -> None:
    schemes = OPENAPI["components"]["securitySchemes"]
    assert set(schemes) == {"bearerAuth", "workerToken", "workerSecret"}
    for scheme in schemes.values():
        assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    assert "secret" in schemes["workerSecret"]["description"]
    assert "security" not in OPENAPI  # per operation: the health checks take none
