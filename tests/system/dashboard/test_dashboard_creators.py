"""Who made it, in the dashboard: the lists' "Created by" column and "Mine" filter, the pages'
"Created by" fact (docs/dashboard.md), a key's name shown as text however hostile, and a
run a schedule fired naming its schedule."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from herder.client import HerderClient
from tests.system.conftest import Cluster
from tests.system.dashboard.conftest import SignIn, reloaded, run_row

HOSTILE = "<img src=x onerror=window.__pwned=1>"
SHELL = {"runtime": "shell", "command": "true"}


def test_the_lists_and_pages_name_who_made_each_thing(
    herder: HerderClient, cluster: Cluster, sign_in: SignIn
) -> None:
    alice = herder.create_key(role="developer", name="alice")
    mallory = herder.create_key(role="developer", name=HOSTILE)
    with (
        HerderClient(cluster.url, alice.token) as as_alice,
        HerderClient(cluster.url, mallory.token) as as_mallory,
    ):
        job = as_alice.create_job("alices-job", SHELL)
        as_mallory.create_job("mallorys-job", SHELL)
        by_hand = as_alice.start_run(job.id)
        theirs = as_mallory.start_run(job.id)
        fired_job = as_alice.create_job("alices-cron", SHELL)  # its runs apart: they pile up
        schedule = as_alice.create_schedule(
            fired_job.id, {"cron": "* * * * * *", "name": "each-second"}
        )
        workflow = as_alice.create_workflow(
            {"name": "alices-flow", "tasks": [{"name": "a", "job": job.name}]}
        )
        workflow_run = as_mallory.start_workflow(workflow.id)
    page = sign_in(alice.token)

    page.goto("/#/jobs")
    expect(page.locator('tr[data-job="alices-job"] .creator')).to_have_text("alice")
    expect(page.locator('tr[data-job="mallorys-job"] .creator')).to_have_text(HOSTILE)  # as text
    page.get_by_label("Mine").check()
    expect(page).to_have_url(re.compile(r"#/jobs\?mine=1$"))
    expect(page.locator('tr[data-job="mallorys-job"]')).to_have_count(0)
    expect(page.locator('tr[data-job="alices-job"]')).to_be_visible()
    reloaded(page)  # the filter is in the address
    expect(page.get_by_label("Mine")).to_be_checked()
    expect(page.locator('tr[data-job="mallorys-job"]')).to_have_count(0)

    page.goto("/#/runs?job=alices-job&mine=1")
    expect(run_row(page, by_hand.id).locator(".creator")).to_have_text("alice")
    expect(run_row(page, theirs.id)).to_have_count(0)
    page.get_by_label("Mine").uncheck()  # the runs' filter form, sent with its other fields
    expect(run_row(page, theirs.id).locator(".creator")).to_have_text(HOSTILE)
    expect(page).to_have_url(re.compile(r"#/runs\?job=alices-job$"))
    page.goto("/#/runs?job=alices-cron")
    fired = page.locator("tbody tr a.creator", has_text="schedule").first  # a fire's run
    expect(fired).to_have_attribute("href", f"#/schedules/{schedule.id}")
    herder.pause_schedule(schedule.id)
    fired.locator("xpath=ancestor::tr").locator("td a").first.click()  # its run's page
    created = page.locator(".created-by")
    expect(created).to_have_text("Created by schedule")
    created.get_by_role("link", name="schedule", exact=True).click()
    expect(page.get_by_role("heading", name="Schedule each-second")).to_be_visible()
    expect(created.locator(".creator")).to_have_text("alice")  # the schedule's own creator

    page.goto("/#/schedules")
    expect(page.locator("tbody tr", has_text="each-second").locator(".creator")).to_have_text(
        "alice"
    )
    page.goto("/#/workflows?mine=1")
    expect(page.locator("tbody tr", has_text="alices-flow").first.locator(".creator")).to_have_text(
        "alice"
    )
    page.goto(f"/#/workflow-runs/{workflow_run.id}")
    expect(page.locator(".created-by .creator")).to_have_text(HOSTILE)
    page.goto(f"/#/jobs/{job.id}")
    expect(page.locator(".created-by .creator")).to_have_text("alice")
    assert page.evaluate("window.__pwned") is None
