"""The dashboard acting, in a real browser: starting a job's run with its parameters and a
workflow's run with its params, re-running, repairing a workflow run by its tasks, pausing,
resuming and firing a schedule by hand, each offered only to a key that may; the overview's
recent failures over a window kept in the URL; one time format on every view; and the run
page's log search and download (the browser and server: conftest)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import Locator, Page, expect

from herder.client import HerderClient
from tests.system.conftest import Cluster
from tests.system.dashboard.conftest import reloaded, run_row

pytestmark = pytest.mark.system

LOCAL_TIME = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$")


def row_of(within: Page | Locator, run_id: str) -> Locator:
    return within.locator(f'tr[data-run="{run_id}"]')


def accept_dialogs(page: Page) -> None:
    page.on("dialog", lambda dialog: dialog.accept())


def test_a_jobs_run_is_started_with_its_parameters_and_a_refused_one_says_why_by_its_field(
    page: Page, herder: HerderClient
) -> None:
    parameters = [
        {"name": "size", "type": "integer", "default": 3},
        {"name": "colour", "enum": ["red", "blue"], "default": "red"},
        {"name": "label", "description": "what to call it"},
    ]
    command = 'echo "size=$size colour=$colour label=$label"'
    herder.create_job("paint", {"runtime": "shell", "command": command, "parameters": parameters})
    page.get_by_role("link", name="Jobs").click()
    page.locator('tr[data-job="paint"]').get_by_role("link", name="paint").click()
    form = page.get_by_role("form", name="Start a run")
    form.get_by_label("size").fill("lots")
    form.get_by_label("colour").select_option(label="blue")
    form.get_by_label("label").fill("<b>wall</b>")
    form.get_by_role("button", name="Start a run").click()
    expect(form.locator('[data-field="params.size"]')).to_contain_text("integer")
    form.get_by_label("size").fill("7")
    form.get_by_role("button", name="Start a run").click()
    expect(page.get_by_role("heading", name=re.compile(r"^Run run_"))).to_be_visible()
    expect(page.locator("#logs")).to_contain_text("size=7 colour=blue label=<b>wall</b>")

    # an ended run is run again from its page: the new run's page opens
    first = page.get_by_role("heading", name=re.compile(r"^Run run_")).inner_text()
    accept_dialogs(page)  # asked first, as a cancel is
    page.get_by_role("button", name="Re-run").click()
    expect(page.get_by_role("heading", name=re.compile(r"^Run run_"))).not_to_have_text(first)
    expect(page.locator("#logs")).to_contain_text("size=7 colour=blue")


def test_a_workflow_run_is_started_with_params_and_repaired_by_the_tasks_chosen(
    page: Page, herder: HerderClient, tmp_path: Path
) -> None:
    once = tmp_path / f"failed-once-{uuid.uuid4().hex}"
    herder.create_job("extract", {"runtime": "shell", "command": "true"})
    flaky = f"test -e {once} || {{ touch {once}; exit 4; }}"
    herder.create_job("flaky-load", {"runtime": "shell", "command": flaky})
    workflow = herder.create_workflow({
        "name": "nightly-etl",
        "params": {"day": "monday", "batch": 10},
        "tasks": [
            {"name": "extract", "job": "extract"},
            {"name": "load", "job": "flaky-load", "depends_on": ["extract"]},
        ],
    })  # fmt: skip
    page.goto(f"/#/workflows?workflow={workflow.id}")
    form = page.get_by_role("form", name="Start a run")
    expect(form.get_by_label("day")).to_have_value("monday")
    form.get_by_label("batch").fill("25")
    form.get_by_role("button", name="Start a run").click()
    expect(page.get_by_role("heading", name=re.compile(r"^Workflow run wfrun_"))).to_be_visible()
    run_id = page.url.rsplit("/", 1)[-1]
    assert herder.get_workflow_run(run_id).params == {"day": "monday", "batch": 25}
    expect(page.locator(".headline .state").first).to_have_text("failed")

    repair = page.get_by_role("form", name="Repair")
    expect(repair.get_by_label("load")).to_be_checked()  # what did not succeed is ticked
    expect(repair.get_by_label("extract")).not_to_be_checked()
    repair.get_by_role("button", name="Repair").click()
    expect(page.locator(".banner.ok")).to_have_text("Repair: load run again")
    expect(page.locator(".headline .state").first).to_have_text("succeeded")
    expect(page.get_by_role("form", name="Repair")).to_be_visible()  # and again, if need be


def test_a_schedule_is_paused_resumed_and_fired_by_hand_under_its_policy(
    page: Page, herder: HerderClient
) -> None:
    accept_dialogs(page)
    job = herder.create_job("long-report", {"runtime": "shell", "command": "sleep 60"})
    schedule = herder.create_schedule(job.id, {"cron": "0 0 1 1 *", "concurrency_policy": "forbid"})
    try:
        page.goto(f"/#/schedules/{schedule.id}")
        page.get_by_role("button", name="Pause").click()
        expect(page.get_by_role("button", name="Resume")).to_be_visible()
        assert herder.get_schedule(schedule.id).paused
        page.get_by_role("button", name="Fire now").click()  # paused, it still fires by hand
        expect(page.locator(".banner.ok")).to_contain_text("Fired now: started run_")
        fired = herder.list_runs(schedule_id=schedule.id).items
        assert len(fired) == 1
        expect(run_row(page, fired[0].id)).to_be_visible()
        page.get_by_role("button", name="Fire now").click()  # forbid: its run is active
        expect(page.locator(".banner.error")).to_contain_text("forbids concurrent runs")
        page.get_by_role("button", name="Resume").click()
        expect(page.get_by_role("button", name="Pause")).to_be_visible()
        expect(page.locator("td", has_text="triggered").first).to_be_visible()
        run_row(page, fired[0].id).get_by_role("button", name="Cancel").click()
        expect(run_row(page, fired[0].id).locator(".state")).to_have_text("cancelled")
    finally:
        herder.delete_schedule(schedule.id)


def test_a_viewer_is_offered_no_action(
    sign_in: Callable[[str], Page], herder: HerderClient, cluster: Cluster
) -> None:
    tenant = herder.create_tenant("lookers")
    with HerderClient(herder.url, herder.create_api_key(tenant.id, role="admin")) as admin:
        job = admin.create_job("seen", {"runtime": "shell", "command": "true"})
        run = admin.wait(admin.start_run(job.id).id, timeout=15)
        schedule = admin.create_schedule(job.id, {"cron": "0 0 1 1 *"})
    tab = sign_in(herder.create_api_key(tenant.id, role="viewer"))
    tab.goto(f"/#/jobs/{job.id}")
    expect(tab.get_by_role("heading", name="Job seen")).to_be_visible()
    expect(run_row(tab, run.id)).to_be_visible()
    expect(tab.get_by_role("form", name="Start a run")).to_have_count(0)
    expect(tab.get_by_role("button")).to_have_text(["Sign out"])  # no Re-run either
    tab.goto(f"/#/runs/{run.id}")
    expect(tab.get_by_text("Attempt 1 · complete")).to_be_visible()
    expect(tab.get_by_role("button", name="Re-run")).to_have_count(0)
    tab.goto(f"/#/schedules/{schedule.id}")
    expect(tab.get_by_role("heading", name="Next fires")).to_be_visible()
    expect(tab.get_by_role("button", name="Fire now")).to_have_count(0)
    expect(tab.get_by_role("button", name="Pause")).to_have_count(0)


def test_the_overview_lists_the_windows_failures_and_a_reload_keeps_the_window(
    page: Page, herder: HerderClient
) -> None:
    job = herder.create_job("breaks", {"runtime": "shell", "command": "exit 3"})
    failed = herder.wait(herder.start_run(job.id).id, timeout=15)
    fine = herder.create_job("holds", {"runtime": "shell", "command": "true"})
    succeeded = herder.wait(herder.start_run(fine.id).id, timeout=15)
    page.goto("/#/overview")
    failures = page.locator(".failures")
    expect(row_of(failures, failed.id)).to_contain_text("failed")
    expect(row_of(failures, succeeded.id)).to_have_count(0)
    page.get_by_label("Time window").select_option(label="last 6 h")
    expect(page).to_have_url(re.compile(r"#/overview\?window=6h$"))
    expect(page.get_by_role("heading", name="Recent failures, last 6 h")).to_be_visible()
    reloaded(page)
    expect(page.get_by_label("Time window")).to_have_value("6h")
    expect(page.locator('[data-stat="failed (6 h)"]')).to_be_visible()
    row_of(failures, failed.id).get_by_role("link", name=failed.id).click()
    expect(page.get_by_role("heading", name=f"Run {failed.id}")).to_be_visible()

    page.goto("/#/runs?window=1h")
    expect(page.get_by_label("Time window")).to_have_value("1h")
    expect(run_row(page, failed.id)).to_be_visible()
    # a range is typed as times are shown: the browser's local time, 24-hour
    zone = ZoneInfo(page.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone"))
    after = (failed.created_at + timedelta(minutes=1)).astimezone(zone)
    page.get_by_label("Time window").select_option("")
    page.get_by_label("Since").fill(after.strftime("%Y-%m-%d %H:%M"))
    page.get_by_role("button", name="Filter").click()
    expect(page.get_by_text("No runs match.")).to_be_visible()
    page.get_by_label("Since").fill("yesterday-ish")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator(".banner.error")).to_contain_text("since")


def test_one_instant_reads_the_same_on_every_view_in_the_browsers_zone(
    page: Page, herder: HerderClient
) -> None:
    job = herder.create_job("clocked", {"runtime": "shell", "command": "true"})
    run = herder.wait(herder.start_run(job.id).id, timeout=15)
    zone = page.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone")
    expected = run.created_at.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M:%S")
    expect(page.locator("#zone")).to_contain_text(f"times in {zone}")
    page.goto(f"/#/runs?job={job.name}")
    listed = run_row(page, run.id).locator("time").first
    expect(listed).to_have_text(expected)
    page.goto(f"/#/runs/{run.id}")
    created = page.locator("dt", has_text="Created").locator("xpath=following-sibling::dd[1]")
    expect(created).to_have_text(expected)
    assert LOCAL_TIME.match(created.inner_text())


def test_the_log_is_searched_while_followed_and_downloaded_whole(
    page: Page, herder: HerderClient, tmp_path: Path
) -> None:
    go = tmp_path / f"go-{uuid.uuid4().hex}"
    command = (
        "echo 'alpha one'; echo beta; echo 'ALPHA two' >&2; "
        f"while [ ! -e {go} ]; do sleep 0.2; done; echo 'alpha three'; echo gamma"
    )
    job = herder.create_job("chatty", {"runtime": "shell", "command": command})
    run = herder.start_run(job.id)
    page.goto(f"/#/runs/{run.id}")
    expect(page.locator("#logs")).to_contain_text("beta")
    page.get_by_label("Search the log").fill("alpha")
    expect(page.locator(".log-count")).to_have_text("2 matches in 2 lines")
    expect(page.locator("#logs mark")).to_have_text(["alpha", "ALPHA"])
    expect(page.locator("#logs")).not_to_contain_text("beta")
    go.touch()  # more lines while the search stands: it keeps up with them
    expect(page.locator(".log-count")).to_have_text("3 matches in 3 lines")
    expect(page.locator("#logs")).not_to_contain_text("gamma")
    expect(page.get_by_text("Attempt 1 · complete")).to_be_visible()
    with page.expect_download() as download:
        page.get_by_role("button", name="Download .txt").click()
    assert download.value.suggested_filename == f"{run.id}.txt"
    saved = Path(download.value.path()).read_text()
    # the whole log, both streams (their lines' order between streams is as they arrived)
    assert sorted(saved.splitlines()) == ["ALPHA two", "alpha one", "alpha three", "beta", "gamma"]
    page.get_by_label("Search the log").fill("")
    expect(page.locator("#logs")).to_contain_text("gamma")
