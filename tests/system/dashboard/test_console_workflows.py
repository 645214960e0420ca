"""The workflow editor, in a real browser: YAML checked by the server as it is typed, each
problem at its line (listed, marked in the gutter, a click taking the caret there), the graph
drawn from the text (a cycle's tasks marked); a new workflow saved, listed and run on the
worker; an edit saved as a new version, and a stale one (changed through the API meanwhile)
saying so; hostile names shown as text; a viewer offered no editor; the editor usable at a
phone's width (the browser and server: conftest)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
from playwright.sync_api import Locator, Page, Route, ViewportSize, expect

from herder.client import HerderClient
from tests.system.conftest import Cluster
from tests.system.dashboard.conftest import ATTACK, SignIn

pytestmark = pytest.mark.system

DESKTOP = ViewportSize(width=1280, height=800)
PHONE = ViewportSize(width=390, height=844)
ENDED_WITHIN_MS = 60_000
STALE = "Someone changed this since you opened it"

TWO_TASKS = """\
name: etl
tasks:
  - name: extract
    job: extract
  - name: load
    job: load
    depends_on: [extract]
"""


@pytest.fixture
def developer_tenant(cluster: Cluster) -> Iterator[tuple[HerderClient, str, str]]:
    """A tenant of its own: its admin's client, a developer's key and a viewer's key."""
    with cluster.client() as system_admin:
        tenant = system_admin.create_tenant(f"workflow-editors-{uuid.uuid4().hex[:8]}")
        admin_key = system_admin.create_api_key(tenant.id, role="admin")
        developer = system_admin.create_api_key(tenant.id, role="developer")
        viewer = system_admin.create_api_key(tenant.id, role="viewer")
    with HerderClient(cluster.url, admin_key) as admin:
        yield admin, developer, viewer


def text_of(tab: Page) -> Locator:
    return tab.get_by_label("Workflow (YAML)")


def problem_at(tab: Page, line: int) -> Locator:
    return tab.locator(f'.yaml-problems li[data-line="{line}"]')


def marked_line(tab: Page, line: int) -> Locator:
    return tab.locator(f'.yaml-gutter [data-line="{line}"].has-problem')


def test_a_workflow_is_checked_as_typed_drawn_saved_and_run(
    page: Page, herder: HerderClient
) -> None:
    herder.create_job("extract", {"runtime": "shell", "command": "true"})
    herder.create_job("load", {"runtime": "shell", "command": "echo loaded"})
    page.set_viewport_size(DESKTOP)
    page.goto("/#/workflows")
    page.get_by_role("link", name="New workflow").click()
    expect(page.get_by_role("heading", name="New workflow")).to_be_visible()
    status = page.locator(".yaml-status")
    text = text_of(page)

    text.fill(TWO_TASKS)
    expect(status).to_have_text("Valid: 2 task(s), 1 edge(s).")
    expect(page.locator("svg.dag g.task")).to_have_count(2)
    expect(page.locator('svg.dag path.edge[data-from="extract"][data-to="load"]')).to_have_count(1)
    expect(page.locator(".yaml-gutter [data-line]")).to_have_count(8)  # the last line is empty

    # an unknown dependency: named at its line, the line marked, a click takes the caret there
    text.fill(TWO_TASKS.replace("[extract]", "[extract, ghost]"))
    expect(problem_at(page, 7)).to_contain_text("'ghost', which is not a task")
    expect(marked_line(page, 7)).to_have_count(1)
    expect(page.locator(".yaml-gutter .has-problem")).to_have_count(1)
    problem_at(page, 7).get_by_role("button", name="line 7").click()
    caret = text.evaluate("(area) => [document.activeElement === area, area.selectionStart]")
    assert caret == [True, TWO_TASKS.index("    depends_on")]

    # far down a long text: the click scrolls the text there, and the gutter with it
    text.fill("#\n" * 80 + TWO_TASKS.replace("[extract]", "[extract, ghost]"))
    problem_at(page, 87).get_by_role("button", name="line 87").click()
    scrolled = text.evaluate("(area) => [area.scrollTop, area.previousElementSibling.scrollTop]")
    assert scrolled[0] > 0
    assert scrolled[0] == scrolled[1]
    expect(marked_line(page, 87)).to_be_in_viewport()

    # a cycle: named, its tasks marked in the graph
    cycle = TWO_TASKS.replace("    job: extract\n", "    job: extract\n    depends_on: [load]\n")
    text.fill(cycle)
    expect(page.locator(".yaml-problems li")).to_contain_text(["make a cycle"])
    expect(page.locator("svg.dag g.task.marked")).to_have_count(2)

    # a YAML syntax error, at its line; typed in quick succession, the last text's answer wins
    text.fill("name: etl\ntasks:\n  - name: extract\n    job: [extract\n")
    text.fill("name: etl\ntasks:\n  - name: extract\n    job: [extract\n  - name: load\n")
    expect(page.locator(".yaml-problems li")).to_contain_text(["YAML syntax"])
    expect(page.locator(".yaml-gutter .has-problem")).to_have_count(1)
    expect(page.locator("svg.dag")).to_have_count(0)

    # a job that does not exist: the store's check, by its line
    text.fill(TWO_TASKS.replace("job: load", "job: lode"))
    expect(problem_at(page, 6)).to_contain_text("no job of that name")

    # one check in flight: the answer to an older text, held back, is aborted, never shown
    held: list[Route] = []
    page.route(
        "**/v1/workflows/check", lambda route: held.append(route) if not held else route.continue_()
    )
    with page.expect_request("**/v1/workflows/check"):
        text.fill(TWO_TASKS.replace("job: load", "job: held-back"))
    with page.expect_event("requestfailed", lambda request: "/v1/workflows/check" in request.url):
        text.fill(TWO_TASKS)
    expect(status).to_have_text("Valid: 2 task(s), 1 edge(s).")
    page.unroute("**/v1/workflows/check")
    page.get_by_role("button", name="Create workflow").click()
    expect(page.get_by_role("heading", name="etl v1")).to_be_visible()
    expect(page.get_by_role("link", name="etl", exact=True)).to_be_visible()
    page.get_by_role("form", name="Start a run").get_by_role("button", name="Start a run").click()
    expect(page.get_by_role("heading", name=re.compile(r"^Workflow run wfrun_"))).to_be_visible()
    expect(page.locator(".headline .state").first).to_have_text(
        "succeeded", timeout=ENDED_WITHIN_MS
    )


def test_an_edit_saves_a_version_and_a_stale_one_says_so_and_names_stay_text(
    sign_in: SignIn, developer_tenant: tuple[HerderClient, str, str]
) -> None:
    admin, developer, _ = developer_tenant
    admin.create_job("work", {"runtime": "shell", "command": "true"})
    tasks = [{"name": "a", "job": "work"}, {"name": "b", "job": "work", "depends_on": ["a"]}]
    workflow = admin.create_workflow({"name": "report", "tasks": tasks})
    tab = sign_in(developer)
    tab.set_viewport_size(DESKTOP)
    tab.goto(f"/#/workflows?workflow={workflow.id}")
    tab.get_by_role("link", name="Edit").click()
    expect(tab.get_by_role("heading", name="Edit workflow report (version 1)")).to_be_visible()
    text = text_of(tab)
    expect(text).to_have_value(re.compile(r"^name: report\ntasks:\n- name: a\n"))
    written = text.input_value()
    expect(tab.locator(".yaml-status")).to_have_text("Valid: 2 task(s), 1 edge(s).")

    text.fill(written + "- name: c\n  job: work\n  depends_on:\n  - b\n")
    expect(tab.locator(".yaml-status")).to_have_text("Valid: 3 task(s), 2 edge(s).")
    tab.get_by_role("button", name="Save").click()
    expect(tab.locator(".form-banner.ok")).to_have_text("Saved report as version 2.")
    assert [task.name for task in admin.get_workflow(workflow.id).tasks] == ["a", "b", "c"]

    # changed through the API meanwhile: this tab's save is stale and says so
    admin.update_workflow(workflow.id, {"name": "report", "tasks": tasks})
    text.fill(written.replace("name: b", "name: bee").replace("- a\n", "- a\n"))
    expect(tab.locator(".yaml-status")).to_have_text("Valid: 2 task(s), 1 edge(s).")
    tab.get_by_role("button", name="Save").click()
    expect(tab.locator(".form-banner.error")).to_contain_text(STALE)
    assert admin.get_workflow(workflow.id).version == 3

    # hostile names: refused by their field and line, shown as text (in the graph too)
    text.fill(f"name: '{ATTACK}'\ntasks:\n  - name: '{ATTACK}'\n    job: work\n")
    expect(problem_at(tab, 1)).to_contain_text("name must be")
    expect(problem_at(tab, 3)).to_contain_text("name must be")
    expect(tab.locator("svg.dag g.task text.task-name")).to_have_text(ATTACK[:18])
    tab.get_by_role("button", name="Save").click()
    expect(tab.locator('.field-error[data-field="yaml"]')).to_contain_text("Not saved: 2 problem")
    assert tab.evaluate("window.__pwned") is None
    assert admin.get_workflow(workflow.id).version == 3


def test_a_viewer_sees_no_editor_and_the_editor_fits_a_phone(
    sign_in: SignIn, developer_tenant: tuple[HerderClient, str, str]
) -> None:
    admin, developer, viewer = developer_tenant
    admin.create_job("extract", {"runtime": "shell", "command": "true"})
    admin.create_job("load", {"runtime": "shell", "command": "true"})
    workflow = admin.create_workflow({"name": "seen", "tasks": [{"name": "a", "job": "load"}]})
    tab = sign_in(viewer)
    tab.goto(f"/#/workflows?workflow={workflow.id}")
    expect(tab.get_by_role("heading", name="seen v1")).to_be_visible()
    expect(tab.get_by_role("link", name="Edit")).to_have_count(0)
    expect(tab.get_by_role("link", name="New workflow")).to_have_count(0)
    tab.goto(f"/#/workflow-editor/{workflow.id}")
    expect(tab.get_by_text("needs a developer's or an admin's key")).to_be_visible()
    expect(tab.locator("textarea")).to_have_count(0)

    phone = sign_in(developer)
    phone.set_viewport_size(PHONE)
    phone.goto("/#/workflow-editor")
    text = text_of(phone)
    text.fill(TWO_TASKS.replace("name: etl", "name: from-a-phone"))
    expect(phone.locator(".yaml-status")).to_have_text("Valid: 2 task(s), 1 edge(s).")
    assert phone.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    create = phone.get_by_role("button", name="Create workflow")
    create.scroll_into_view_if_needed()
    expect(create).to_be_in_viewport()
    create.click()
    expect(phone.get_by_role("heading", name="from-a-phone v1")).to_be_visible()
    assert phone.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
