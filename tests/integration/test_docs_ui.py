"""/docs and /redoc work on a machine without internet: every script, stylesheet and icon
they load is served by the API itself, without a key, and nothing else under /docs/assets
can be reached through them."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest
from fastapi.testclient import TestClient

from tests.integration.conftest import Api
from tests.integration.openapi import OPENAPI

CONTENT_TYPES = {
    ".js": "javascript",
    ".css": "text/css",
    ".png": "image/png",
}


def _referenced_urls(page: str) -> list[str]:
    """Every URL the page loads or links to: src, href, and the spec URL each viewer fetches."""
    return re.findall(r"""(?:src|href|url|spec-url)\s*[=:]\s*["']([^"']+)["']""", page)


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_a_documentation_page_loads_only_what_the_api_serves(api: Api, page: str) -> None:
    response = api.http.get(page)  # no key: the page shows only what /openapi.json shows
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/html")
    assert "http" not in response.text.lower()
    assert "cdn" not in response.text.lower()
    urls = _referenced_urls(response.text)
    assert "/openapi.json" in urls
    assets = [url for url in urls if url != "/openapi.json"]
    assert any(url.endswith(".js") for url in assets), urls
    for url in assets:
        assert url.startswith("/docs/assets/"), url
        asset = api.http.get(url)
        assert asset.status_code == 200, url
        assert CONTENT_TYPES[url[url.rindex(".") :]] in asset.headers["content-type"], url
        assert len(asset.content) > 1000, url


@pytest.mark.parametrize("root_path", ["", "/herder"])
@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_a_documentation_page_allows_only_this_origin_and_its_own_inline_code(
    api: Api, page: str, root_path: str
) -> None:
    response = TestClient(api.http.app, root_path=root_path).get(page)
    policy = dict(
        directive.strip().split(" ", 1)
        for directive in response.headers["content-security-policy"].split(";")
    )
    assert policy["default-src"] == "'none'"
    assert policy["frame-ancestors"] == "'none'"
    assert response.headers["x-frame-options"] == "DENY"
    assert "http" not in response.headers["content-security-policy"]
    inline = re.findall(r"<script>(.*?)</script>", response.text, re.DOTALL)
    hashes = [
        "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"
        for script in inline
    ]
    assert policy["script-src"] == " ".join(["'self'", *hashes])  # the page's own, as it is now
    assert policy["img-src"] == "'self' data:"
    assert policy["connect-src"] == "'self'"


def test_swagger_ui_does_not_ask_an_outside_validator(api: Api) -> None:
    assert '"validatorUrl": null' in api.http.get("/docs").text


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_behind_a_proxy_prefix_the_pages_load_through_it(api: Api, page: str) -> None:
    proxied = TestClient(api.http.app, root_path="/herder")
    urls = _referenced_urls(proxied.get(page).text)
    assert "/herder/openapi.json" in urls
    assert all(url.startswith("/herder/") for url in urls), urls


def test_the_documentation_pages_are_not_api_routes() -> None:
    assert not [path for path in OPENAPI["paths"] if path.startswith(("/docs", "/redoc"))]


@pytest.mark.parametrize(
    "path",
    [
        "/docs/assets/../core.py",
        "/docs/assets/%2e%2e/core.py",
        "/docs/assets/..%2fcore.py",
        "/docs/assets/%2e%2e/%2e%2e/herder/settings.py",
        "/docs/assets/",
        "/docs/assets/no-such-file.js",
        "/docs/assets/" + "a" * 5000,
        "/docs/assets/%00.js",
    ],
)
def test_nothing_but_the_assets_can_be_read_under_docs(api: Api, path: str) -> None:
    response = api.http.get(path)
    assert response.status_code in (404, 422), (path, response.status_code)  # 422: the NUL
    assert response.headers["content-type"].startswith("application/problem+json")


@pytest.mark.parametrize("path", ["/docs", "/redoc", "/docs/assets/swagger-ui.css"])
def test_the_documentation_pages_only_read(api: Api, path: str) -> None:
    response = api.http.post(path, headers=api.admin, content=b"x")
    assert response.status_code == 405, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
