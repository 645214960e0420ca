"""The console's jobs and schedules, in a real browser (issue 46 §1): a job made from a
program dropped on its form, its runtime guessed, its parameters declared row by row, run
on the worker and started with them; an edit sent with its ETag, a stale one said so, a
delete asked first; a schedule made with its next fires previewed in its zone as the cron is
typed, a cron the API refuses said beside its field; hostile input shown as text and refused
by its field; a viewer offered none of it; and every form usable at a phone's width (the
browser and server: conftest)."""

from __future__ import annotations

import re
from collections.abc import Callable

import httpx
import pytest
from playwright.sync_api import FilePayload, Locator, Page, ViewportSize, expect

from herder.client import HerderClient
from tests.system.conftest import Cluster
from tests.system.dashboard.conftest import ATTACK

pytestmark = pytest.mark.system

DESKTOP = ViewportSize(width=1280, height=800)
PHONE = ViewportSize(width=390, height=844)
PROGRAM = b'import os\nprint("hello", os.environ["who"], "x" + os.environ["times"])\n'
MIB = 1024 * 1024


def accept_dialogs(page: Page) -> None:
    page.on("dialog", lambda dialog: dialog.accept())


def labelled(form: Locator, label: str) -> Locator:
    """The field of that label alone ("Name", not "Parameter 1 name"), " *" if required."""
    return form.get_by_label(re.compile(rf"^{re.escape(label)}( \*)?$"))


def beside(form: Locator, field: str) -> Locator:
    return form.locator(f'.field-error[data-field="{field}"]')


def drop(page: Page, target: Locator, name: str, content: bytes) -> None:
    """A file dragged from the desktop and dropped on ``target``, as the browser sends it."""
    transfer = page.evaluate_handle(
        """([name, text]) => {
            const transfer = new DataTransfer();
            transfer.items.add(new File([text], name, { type: "text/x-python" }));
            return transfer;
        }""",
        [name, content.decode()],
    )
    target.dispatch_event("dragover", {"dataTransfer": transfer})
    target.dispatch_event("drop", {"dataTransfer": transfer})


def not_wider_than_the_screen(page: Page) -> None:
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    wide = page.evaluate(
        """() => [...document.querySelectorAll("body *")]
            .filter((node) => node.getBoundingClientRect().right > window.innerWidth)
            .slice(0, 5).map((node) => `${node.tagName}.${node.className}`)"""
    )
    assert overflow <= 0, f"the page is {overflow}px wider than the screen: {wide}"


def test_a_job_is_made_from_a_dropped_program_and_runs_with_its_declared_parameters(
    page: Page, herder: HerderClient
) -> None:
    page.set_viewport_size(DESKTOP)
    page.get_by_role("link", name="Jobs").click()
    page.get_by_role("button", name="New job").click()
    form = page.get_by_role("form", name="New job")
    labelled(form, "Name").fill(ATTACK)
    drop(page, form.locator(".drop-zone"), "greet.py", PROGRAM)
    expect(form.get_by_label("Runtime")).to_have_value("python")  # guessed from its name
    expect(form.locator(".drop-zone .chosen")).to_have_text(f"greet.py · {len(PROGRAM)} B")
    form.get_by_role("button", name="Add a parameter").click()
    form.get_by_label("Parameter 1 name").fill("who")
    form.get_by_label("Parameter 1 default").fill("world")
    form.get_by_label("Parameter 1 description").fill(ATTACK)
    form.get_by_role("button", name="Add a parameter").click()
    form.get_by_label("Parameter 2 name").fill("times")
    form.get_by_label("Parameter 2 type").select_option("integer")
    form.get_by_label("Parameter 2 default").fill("3")
    form.get_by_role("button", name="Create job").click()
    # refused by their fields: the hostile name as text, then a default of the wrong type
    expect(beside(form, "name")).to_contain_text("name")
    assert page.evaluate("window.__pwned") is None
    labelled(form, "Name").fill("greeter")
    form.get_by_label("Parameter 2 default").fill("many")
    form.get_by_role("button", name="Create job").click()
    expect(beside(form, "parameters")).to_contain_text("parameters.1.default")
    expect(form.get_by_label("Parameter 2 default")).to_have_attribute("aria-invalid", "true")
    form.get_by_label("Parameter 2 default").fill("3")
    form.get_by_role("button", name="Create job").click()

    expect(page.get_by_role("heading", name="Job greeter")).to_be_visible()
    job = herder.find_job("greeter")
    assert job.spec.runtime == "python"
    assert [(one.name, one.default) for one in job.spec.parameters] == [
        ("who", "world"),
        ("times", 3),
    ]
    start = page.get_by_role("form", name="Start a run")
    expect(start.get_by_label("who")).to_have_value("world")
    expect(start.get_by_text(ATTACK)).to_be_visible()  # its description, as text
    start.get_by_label("times").fill("4")
    start.get_by_role("button", name="Start a run").click()
    expect(page.get_by_role("heading", name=re.compile(r"^Run run_"))).to_be_visible()
    expect(page.locator("#logs")).to_contain_text("hello world x4")
    expect(page.locator(".headline .state").first).to_have_text("succeeded")


def test_a_program_over_the_limit_is_refused_before_it_is_sent_and_the_apis_413_is_shown(
    page: Page, cluster: Cluster
) -> None:
    page.set_viewport_size(DESKTOP)
    uploads: list[str] = []
    page.on(
        "request", lambda asked: uploads.append(asked.url) if "/v1/artifacts" in asked.url else None
    )
    page.goto("/#/jobs")
    page.get_by_role("button", name="New job").click()
    form = page.get_by_role("form", name="New job")
    labelled(form, "Name").fill("too-big")
    program = form.get_by_label("Program")
    big = FilePayload(name="big.tar", mimeType="application/x-tar", buffer=b"\0" * (10 * MIB + 1))
    program.set_input_files(big)
    expect(beside(form, "artifact")).to_contain_text("at most 10 MiB")
    expect(form.get_by_label("Runtime")).to_have_value("archive")
    form.get_by_label("Command").fill("true")
    form.get_by_role("button", name="Create job").click()
    expect(beside(form, "artifact")).to_contain_text("Nothing was uploaded")
    assert uploads == []

    # The server's own refusal (a proxy's lower limit, say), shown beside the program too.
    key = cluster.credentials["api_key"]
    files = {"file": ("big.tar", b"\0" * (10 * MIB + 1))}
    refused = httpx.post(
        f"{cluster.url}/v1/artifacts", headers={"Authorization": f"Bearer {key}"}, files=files
    )
    assert refused.status_code == 413
    page.route(
        "**/v1/artifacts",
        lambda route: route.fulfill(
            status=413, body=refused.content, headers={"Content-Type": "application/problem+json"}
        ),
    )
    program.set_input_files(
        {"name": "small.tar", "mimeType": "application/x-tar", "buffer": b"x" * 10}
    )
    form.get_by_role("button", name="Create job").click()
    expect(beside(form, "artifact")).to_contain_text("The program was not uploaded")
    expect(beside(form, "artifact")).to_contain_text("larger than the artifact limit")
    page.unroute("**/v1/artifacts")
    program.set_input_files({"name": "empty.py", "mimeType": "text/x-python", "buffer": b""})
    form.get_by_role("button", name="Create job").click()
    expect(beside(form, "artifact")).to_contain_text("empty")  # the API's 422, by its field


def test_a_job_is_edited_with_its_etag_a_stale_edit_says_so_and_a_delete_asks_first(
    page: Page, herder: HerderClient
) -> None:
    page.set_viewport_size(DESKTOP)
    accept_dialogs(page)
    job = herder.create_job(
        "editable", {"runtime": "shell", "command": "echo one", "env": {"A": "1"}}
    )
    page.goto(f"/#/jobs/{job.id}")
    page.get_by_role("button", name="Edit").click()
    form = page.get_by_role("form", name="Edit job")
    expect(form.get_by_label("Environment")).to_have_value("A=1")
    form.get_by_label("Environment").fill("A=1\nno equals sign")
    form.get_by_role("button", name="Save").click()
    expect(beside(form, "env")).to_have_text("line 2: write name=value")
    form.get_by_label("Environment").fill("A=1\nB=x\u0000y")
    form.get_by_role("button", name="Save").click()
    expect(beside(form, "env")).to_contain_text("NUL")  # the API's 422, by its field
    form.get_by_label("Environment").fill("A=1")
    form.get_by_label("CPU cores").fill("-1")
    form.get_by_role("button", name="Save").click()
    expect(beside(form, "resources.cpu")).to_contain_text("greater than 0")
    form.get_by_label("CPU cores").fill("0.5")
    form.get_by_label("Timeout (seconds)").fill("120")
    form.get_by_role("button", name="Save").click()
    expect(page.locator(".banner.ok")).to_have_text("Saved: job editable is at version 2.")
    edited = herder.get_job(job.id)
    assert (edited.spec.timeout_seconds, edited.spec.resources.cpu, edited.spec.env) == (
        120,
        0.5,
        {"A": "1"},
    )

    page.get_by_role("button", name="Edit").click()
    form = page.get_by_role("form", name="Edit job")
    form.get_by_label("Command").fill("echo mine")
    herder.update_job(job.id, {"command": "echo theirs"})  # meanwhile, someone else
    form.get_by_role("button", name="Save").click()
    expect(form.locator(".form-banner.error")).to_contain_text(
        "Someone changed this since you opened it"
    )
    assert herder.get_job(job.id).spec.command == "echo theirs"  # theirs kept
    form.get_by_role("button", name="Cancel").click()

    page.get_by_role("button", name="Delete").click()
    expect(page.get_by_role("heading", name="Jobs")).to_be_visible()
    assert [one.name for one in herder.list_jobs(name="editable").items] == []


def test_a_schedule_is_made_with_its_next_fires_previewed_in_its_zone_as_the_cron_is_typed(
    page: Page, herder: HerderClient
) -> None:
    page.set_viewport_size(DESKTOP)
    accept_dialogs(page)
    herder.create_job("tick", {"runtime": "shell", "command": "true"})
    sized = {"name": "size", "enum": ["small", "large"], "default": "small"}
    herder.create_job(
        "sized-report", {"runtime": "shell", "command": "true", "parameters": [sized]}
    )
    page.goto("/#/schedules")
    page.get_by_role("button", name="New schedule").click()
    form = page.get_by_role("form", name="New schedule")
    form.get_by_label("Job").select_option(label="sized-report")
    form = page.get_by_role("form", name="New schedule")  # drawn again with the job's params
    form.get_by_label("size").select_option(label="large")
    fires = form.get_by_role("list", name="Next fires").locator("li")
    form.get_by_label("Time zone").fill("Asia/Tokyo")
    form.get_by_label("Cron").press_sequentially("0 3 * * *")
    expect(fires).to_have_count(5)
    expect(fires.first).to_contain_text("03:00:00 Asia/Tokyo")
    form.get_by_label("Cron").fill("30 7 * * 1")
    expect(fires.first).to_contain_text("07:30:00 Asia/Tokyo")
    form.get_by_label("Time zone").fill("America/New_York")
    expect(fires.first).to_contain_text("07:30:00 America/New_York")
    assert all(
        "-0" in local
        for local in fires.evaluate_all("items => items.map((one) => one.dataset.local)")
    )
    form.get_by_label("Cron").fill("61 * * * *")
    expect(beside(form, "cron")).to_contain_text("minute")  # as typed, before any save
    expect(fires).to_have_count(0)
    form.get_by_label("Time zone").fill("Mars/Olympus")
    form.get_by_label("Cron").fill("30 7 * * 1")
    expect(beside(form, "timezone")).to_contain_text("Mars/Olympus")
    form.get_by_label("Time zone").fill("America/New_York")
    expect(beside(form, "timezone")).to_be_hidden()
    labelled(form, "Name").fill(ATTACK)
    form.get_by_role("button", name="Create schedule").click()
    expect(beside(form, "name")).to_be_visible()  # the API's 422, as text
    assert page.evaluate("window.__pwned") is None
    labelled(form, "Name").fill("weekly-report")
    form.get_by_role("button", name="Create schedule").click()

    expect(page.get_by_role("heading", name="Schedule weekly-report")).to_be_visible()
    schedule = herder.list_schedules(name="weekly-report").items[0]
    assert (schedule.spec.cron, schedule.spec.timezone) == ("30 7 * * 1", "America/New_York")
    assert schedule.spec.overrides.params == {"size": "large"}

    page.get_by_role("button", name="Edit").click()
    edit = page.get_by_role("form", name="Edit schedule")
    expect(edit.get_by_label("size")).to_have_value("1")  # "large", as saved
    edit.get_by_label("Cron").fill("0 9 * * *")
    expect(edit.get_by_role("list", name="Next fires").locator("li").first).to_contain_text(
        "09:00:00"
    )
    herder.update_schedule(schedule.id, {"jitter_seconds": 5})  # meanwhile, someone else
    edit.get_by_role("button", name="Save").click()
    expect(edit.locator(".form-banner.error")).to_contain_text(
        "Someone changed this since you opened it"
    )
    edit.get_by_role("button", name="Cancel").click()
    page.get_by_role("button", name="Edit").click()
    edit = page.get_by_role("form", name="Edit schedule")
    edit.get_by_label("Cron").fill("0 9 * * *")
    edit.get_by_role("button", name="Save").click()
    expect(page.locator(".banner.ok")).to_contain_text("Saved")
    saved = herder.get_schedule(schedule.id)
    assert (saved.spec.cron, saved.spec.jitter_seconds) == ("0 9 * * *", 5)
    page.get_by_role("button", name="Delete").click()
    expect(page.get_by_role("heading", name="Schedules")).to_be_visible()
    assert herder.list_schedules(name="weekly-report").items == []


def test_a_viewer_is_offered_no_console_and_the_forms_fit_a_phone(
    sign_in: Callable[[str], Page], herder: HerderClient
) -> None:
    tenant = herder.create_tenant("console-viewers")
    with HerderClient(herder.url, herder.create_api_key(tenant.id, role="admin")) as admin:
        job = admin.create_job("seen", {"runtime": "shell", "command": "true"})
        schedule = admin.create_schedule(job.id, {"cron": "0 0 1 1 *"})
    viewer = sign_in(herder.create_api_key(tenant.id, role="viewer"))
    viewer.goto("/#/jobs")
    expect(viewer.locator('tr[data-job="seen"]')).to_be_visible()
    expect(viewer.get_by_role("button", name="New job")).to_have_count(0)
    viewer.goto(f"/#/jobs/{job.id}")
    expect(viewer.get_by_role("heading", name="Job seen")).to_be_visible()
    expect(viewer.get_by_role("button")).to_have_text(["Sign out"])
    viewer.goto("/#/schedules")
    expect(viewer.get_by_role("heading", name="Schedules")).to_be_visible()
    expect(viewer.get_by_role("button", name="New schedule")).to_have_count(0)
    viewer.goto(f"/#/schedules/{schedule.id}")
    expect(viewer.get_by_role("heading", name="Next fires")).to_be_visible()
    expect(viewer.get_by_role("button", name="Edit")).to_have_count(0)
    expect(viewer.get_by_role("button", name="Delete")).to_have_count(0)

    developer = sign_in(herder.create_api_key(tenant.id, role="developer"))
    developer.set_viewport_size(PHONE)
    developer.goto("/#/jobs")
    developer.get_by_role("button", name="New job").click()
    form = developer.get_by_role("form", name="New job")
    form.get_by_role("button", name="Add a parameter").click()
    not_wider_than_the_screen(developer)
    labelled(form, "Name").fill("from-a-phone")
    form.get_by_label("Command").fill("echo small")
    form.get_by_role("button", name="Create job").click()
    expect(developer.get_by_role("heading", name="Job from-a-phone")).to_be_visible()
    developer.get_by_role("button", name="Edit").click()
    expect(developer.get_by_role("form", name="Edit job")).to_be_visible()
    not_wider_than_the_screen(developer)
    developer.goto("/#/schedules")
    developer.get_by_role("button", name="New schedule").click()
    form = developer.get_by_role("form", name="New schedule")
    form.get_by_label("Cron").fill("*/5 * * * *")
    expect(form.get_by_role("list", name="Next fires").locator("li")).to_have_count(5)
    not_wider_than_the_screen(developer)
    developer.goto(f"/#/schedules/{schedule.id}")
    developer.get_by_role("button", name="Edit").click()
    expect(developer.get_by_role("form", name="Edit schedule")).to_be_visible()
    not_wider_than_the_screen(developer)
