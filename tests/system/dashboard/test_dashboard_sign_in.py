"""Signing in to the dashboard through a real OpenID provider (docs/tenants.md "Single
sign-on"): the provider's button beside the key's form, the provider's own login page, back
signed in with the person's name in the header; the app's changes carry the CSRF token
while a bare request with the cookie is refused; signing out ends the session."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.oidc_provider.provider import Provider
from tests.system.conftest import Cluster
from tests.system.dashboard.conftest import SEEN_WITHIN_MS, started
from tests.system.signed_in import server_behind_provider

JOB = {"name": "made-by-alice", "runtime": "shell", "command": "true"}


@dataclass(frozen=True)
class SignedInServer:
    cluster: Cluster
    provider: Provider


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SignedInServer]:
    with server_behind_provider(tmp_path_factory.mktemp("sso")) as (cluster, provider):
        yield SignedInServer(cluster, provider)


@pytest.fixture
def tab(browser: Browser, server: SignedInServer) -> Iterator[Page]:
    context = browser.new_context(base_url=server.cluster.url)
    page = context.new_page()
    page.set_default_timeout(SEEN_WITHIN_MS)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        yield page
    finally:
        context.close()
    assert not errors, errors


def test_a_person_signs_in_with_the_provider_and_out(tab: Page) -> None:
    tab.goto("/")
    started(tab)
    tab.get_by_role("link", name="Sign in with Test provider").click()
    tab.get_by_label("Username").fill("alice")
    tab.get_by_label("Password").fill("alice-password")
    tab.get_by_role("button", name="Sign in").click()
    expect(tab.get_by_role("heading", name="Overview")).to_be_visible()
    expect(tab.locator("#user")).to_have_text("alice")

    made = tab.evaluate(
        """async (job) => {
            const { api } = await import("/ui/api.js");
            return (await api("/v1/jobs", { method: "POST", body: job })).name;
        }""",
        JOB,
    )
    assert made == JOB["name"]
    forged = tab.evaluate(
        """async (job) => (await fetch("/v1/jobs", {
            method: "POST", credentials: "same-origin",
            headers: { "Content-Type": "application/json" }, body: JSON.stringify(job),
        })).status""",
        {**JOB, "name": "forged"},
    )
    assert forged == 403

    tab.get_by_role("button", name="Sign out").click()
    expect(tab.get_by_label("API key")).to_be_visible()
    # the session is revoked on the server, so its cookie, sent again, admits nothing
    tab.wait_for_function(
        "async () => (await fetch('/auth/session', { credentials: 'same-origin' })).status === 401",
        polling=200,
    )
