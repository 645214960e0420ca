"""The browser and the server the dashboard's tests share: Debian's ``chromium`` driven by
Playwright against a real server and an isolation-none worker, one per test module.
Screenshots go to ``.test-results/screenshots/``. ``make test`` installs the browser (apt) and
Playwright (pip); the tests never download a browser of their own and never skip for want of
one."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import pytest
from playwright.sync_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Locator,
    Page,
    expect,
    sync_playwright,
)

from herder.client import HerderClient
from herder.settings import sqlite_url
from tests.system.conftest import Cluster, free_port

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = Path(__file__).parents[3] / ".test-results" / "screenshots"
SEEN_WITHIN_MS = 15_000
MODULE_LOAD_TRIES = 6  # reloads of the page before its sign-in form must show
ALERTED_WITHIN_MS = 30_000  # the evaluator's pass (every 5 s), then the sender's (every 5 s)
ATTACK = "<img src=x onerror=window.__pwned=1><script>window.__pwned=2</script>"
# The stylesheet's colours of the tones ok (--ok) and active (--run), as the browser computes them.
OK_COLOUR = "rgb(47, 133, 90)"
ACTIVE_COLOUR = "rgb(44, 122, 155)"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One server (with its control loops) and one isolation-none worker for the module."""
    home = tmp_path_factory.mktemp("dashboard") / "home"
    port = free_port()
    environment = {
        **os.environ,
        "HERDER_HOME": str(home),
        "HERDER_DATABASE_URL": sqlite_url(home / "herder.db"),
        "PYTHONUNBUFFERED": "1",
        "HERDER_CRON_SECONDS": "1",  # a schedule's page shows its fires within seconds
    }
    started = Cluster(
        home=home,
        url=f"http://127.0.0.1:{port}",
        environment=environment,
        server_args=("server", "--with-scheduler", "--port", str(port)),
    )
    try:
        started.start_server()
        started.start_worker("w1", "--isolation", "none", "--cpu", "2", "--label", "pool=web")
        yield started
    finally:
        started.stop_all()


@pytest.fixture(scope="module")
def herder(cluster: Cluster) -> Iterator[HerderClient]:
    with cluster.client() as client:
        yield client


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium package")
    # The tabs' default timeout covers actions only; assertions default to 5 s, too short for
    # a refresh on a loaded CI box (load ~35 on 2 cores), so they get the same allowance.
    expect.set_options(timeout=SEEN_WITHIN_MS)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield launched
        launched.close()


class SignIn(Protocol):
    def __call__(self, key: str, at: str | None = None) -> Page:
        """A fresh tab of the dashboard at ``at`` (the cluster's server unless named, such as
        an edge in front of it), signed in with ``key``."""
        ...


def started(tab: Page) -> None:
    """Waits for the page's app to start, reloading as a user would while it cannot: Chromium
    drops requests in flight when the host's interfaces change, as the attempt-network tests
    beside these make them change (net::ERR_NETWORK_CHANGED), and the page then says its
    scripts did not load and offers a reload. Each load is judged, the last reload's too."""
    reload = tab.get_by_role("button", name="Reload")
    loading = tab.locator("#starting").filter(has_not=reload)  # gone once the app started
    for reloads in itertools.count():
        expect(loading).to_have_count(0)  # started, or failed with a reload offered
        if not reload.is_visible():
            return
        assert reloads < MODULE_LOAD_TRIES, "the page's scripts never loaded"
        reload.click()


def reloaded(tab: Page) -> None:
    """The page reloaded (F5) and its app started again."""
    tab.reload()
    started(tab)


@pytest.fixture
def sign_in(browser: Browser, cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[SignIn]:
    """``sign_in(key)``: a fresh tab signed in with the key (``at=``: another address). Each
    tab's last look is kept as a screenshot; a script error or anything the CSP refused, in
    any tab, fails the test. The browser's console errors and failed requests are printed,
    so a failure shows them."""
    contexts: list[BrowserContext] = []
    errors: list[str] = []

    def refused(text: str) -> None:
        """What the Content-Security-Policy blocked: the page's own code never needs it."""
        if "Content Security Policy" in text:
            errors.append(text)

    def printed_if_error(message: ConsoleMessage) -> None:
        """Such as a script the server did not send: pytest shows it when the test fails."""
        if message.type == "error":
            print(f"console error: {message.text}")

    def open_tab(key: str, at: str | None = None) -> Page:
        context = browser.new_context(
            base_url=at or cluster.url, viewport={"width": 1280, "height": 900}
        )
        contexts.append(context)
        tab = context.new_page()
        tab.set_default_timeout(SEEN_WITHIN_MS)
        tab.on("pageerror", lambda error: errors.append(str(error)))
        tab.on("console", lambda message: refused(message.text))
        tab.on("console", printed_if_error)
        tab.on("requestfailed", lambda asked: print(f"failed: {asked.url} {asked.failure}"))
        tab.goto("/")
        started(tab)
        tab.get_by_label("API key").fill(key)
        tab.get_by_role("button", name="Sign in").click()
        expect(tab.get_by_role("heading", name="Overview")).to_be_visible()
        return tab

    yield open_tab
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for number, context in enumerate(contexts):
        suffix = f"-{number}" if number else ""
        path = SCREENSHOTS / f"{request.node.name}{suffix}.png"
        if context.pages:  # a tab the browser closed (it crashed) has nothing to show
            context.pages[0].screenshot(path=path, full_page=True)
        context.close()
    assert not errors, errors


@pytest.fixture
def page(sign_in: Callable[[str], Page], cluster: Cluster) -> Page:
    """A tab signed in as the system admin."""
    return sign_in(cluster.credentials["api_key"])


def run_row(page: Page, run_id: str) -> Locator:
    return page.locator(f'tr[data-run="{run_id}"]')
