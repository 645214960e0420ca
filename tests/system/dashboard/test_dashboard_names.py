"""The dashboard names things as people know them: the key and the worker that acted on a
run, its params, tenants, a rule's params and an incident's subject by name; approvals shown
as waiting for a person and never as failed work; a schedule's job, params and policies;
deliveries saying why they failed; empty pages saying how to make one; pools with their
shares and autoscaling."""

from __future__ import annotations

import re
from collections.abc import Callable

import httpx
from playwright.sync_api import Dialog, Page, expect

from herder.client import HerderClient
from tests.system.conftest import Cluster, free_port
from tests.system.dashboard.conftest import ALERTED_WITHIN_MS, run_row


def reject(cluster: Cluster, workflow_run_id: str, task: str) -> None:
    key = {"Authorization": f"Bearer {cluster.credentials['api_key']}"}
    with httpx.Client(base_url=cluster.url, headers=key) as http:
        path = f"/v1/workflow-runs/{workflow_run_id}/tasks/{task}/reject"
        answer = http.post(path, json={"comment": "not yet"})
    assert answer.status_code == 200, answer.text


def test_a_run_names_who_acted_its_worker_and_its_params(page: Page, herder: HerderClient) -> None:
    parameters = [{"name": "size", "type": "integer", "default": 3}, {"name": "colour"}]
    job = herder.create_job(
        "paint", {"runtime": "shell", "command": "echo $size", "parameters": parameters}
    )
    run = herder.wait(herder.start_run(job.id, params={"size": 7, "colour": "red"}).id, timeout=15)
    page.goto(f"/#/runs/{run.id}")
    expect(page.locator(".facts .param")).to_have_text(["size=7", "colour=red"])
    attempt = page.locator("table").nth(0).locator("tbody tr").first
    expect(attempt.locator("td").nth(2)).to_have_text("w1")  # the worker, by its name
    events = page.locator("table").nth(1)
    expect(events).to_contain_text("bootstrap admin (admin)")  # the key that started it
    expect(events).not_to_contain_text("user:key_")
    expect(events).not_to_contain_text("worker:wrk_")
    asked: list[str] = []

    def accept(dialog: Dialog) -> None:
        asked.append(dialog.message)
        dialog.accept()

    page.on("dialog", accept)
    page.get_by_role("button", name="Re-run").click()
    expect(page.get_by_role("heading", name=re.compile(r"^Run run_"))).not_to_have_text(
        f"Run {run.id}"
    )
    assert asked == [f"Re-run run {run.id} (paint)? A new run starts."]


def test_the_queue_and_usage_name_the_tenant(page: Page, herder: HerderClient) -> None:
    stuck = herder.create_job(
        "stuck", {"runtime": "shell", "command": "true", "requires": {"zone": "nowhere"}}
    )
    queued = herder.start_run(stuck.id)
    (tenant,) = [one for one in herder.list_tenants().items if one.is_system]
    page.get_by_role("link", name="Queue").click()
    expect(run_row(page, queued.id).locator("td").nth(1)).to_have_text(tenant.name)
    page.get_by_role("link", name="Usage").click()
    expect(page.locator("table").first.locator("tbody tr").first.locator("td").first).to_have_text(
        tenant.name
    )
    herder.cancel_run(queued.id)


def test_approvals_wait_for_a_person_and_are_no_failures(
    page: Page, herder: HerderClient, cluster: Cluster
) -> None:
    herder.create_job("train", {"runtime": "shell", "command": "true"})
    tasks = [
        {"name": "train", "job": "train"},
        {"name": "review", "approval": {"message": "publish?"}, "depends_on": ["train"]},
    ]
    flow = herder.create_workflow({"name": "publish", "tasks": tasks})
    page.get_by_role("link", name="Workflows").click()
    page.get_by_role("link", name="publish").click()
    review_box = page.locator('svg.dag g.task[data-task="review"]')
    expect(review_box).to_contain_text("approval")  # what it is, not a state: none has run
    expect(review_box).to_have_class(re.compile(r"\bdefinition\b"))
    failed = page.locator('[data-stat^="failed"] .number')
    page.get_by_role("link", name="Overview").click()
    failures_before = failed.inner_text()
    started = herder.start_workflow(flow.id)
    awaiting = page.locator('[data-stat="awaiting approval"] .number')
    expect(awaiting).to_have_text("1")
    page.get_by_role("link", name="Workflows").click()
    expect(page.locator("tr", has_text=started.id)).to_contain_text("awaiting approval: review")
    page.goto("/#/runs?job=")
    approval = page.locator("tbody tr", has_text="approval review")
    expect(approval.get_by_role("link", name="approval review")).to_be_visible()
    expect(page.locator("#view")).not_to_contain_text(":approval")
    reject(cluster, started.id, "review")
    page.get_by_role("link", name="Overview").click()
    expect(awaiting).to_have_text("0")
    expect(failed).to_have_text(failures_before)  # a rejection is a decision, not a failure
    expect(page.locator(".failures")).not_to_contain_text("approval")


def test_a_schedule_shows_what_it_starts_with_which_params_and_policies(
    page: Page, herder: HerderClient
) -> None:
    job = herder.create_job(
        "report", {"runtime": "shell", "command": "true", "parameters": [{"name": "region"}]}
    )
    spec = {
        "cron": "0 3 * * *",
        "concurrency_policy": "forbid",
        "misfire_policy": "skip",
        "overrides": {"params": {"region": "eu"}},
    }
    schedule = herder.create_schedule(job.id, spec)
    page.goto(f"/#/schedules/{schedule.id}")
    facts = page.locator(".facts")
    expect(facts).to_contain_text("Startsjob report")
    expect(facts.locator(".param")).to_have_text(["region=eu"])
    expect(facts).to_contain_text("Concurrencyforbid")
    expect(facts).to_contain_text("Misfiresskip")
    herder.delete_schedule(schedule.id)


def test_rules_incidents_and_deliveries_say_what_they_are_about(
    page: Page, herder: HerderClient, cluster: Cluster
) -> None:
    """A channel nobody listens on: the delivery says it could not connect, its attempts
    folded away; an approval_waiting rule's incident names the approval it waits on."""
    channel = herder.create_alert_channel("pager", f"http://127.0.0.1:{free_port()}/hook")
    job = herder.create_job("flaky", {"runtime": "shell", "command": "exit 1"})
    failing = herder.create_alert_rule(
        {"name": "flaky-fails", "kind": "run_failed", "params": {"job_id": job.id},
         "channel_ids": [channel.id]}
    )  # fmt: skip
    waiting = herder.create_alert_rule(
        {"name": "approvals", "kind": "approval_waiting", "channel_ids": [channel.id]}
    )
    tasks = [{"name": "sign-off", "approval": {"message": "go?"}}]
    flow = herder.create_workflow({"name": "gate", "tasks": tasks})
    started = herder.start_workflow(flow.id)
    page.get_by_role("link", name="Alerts").click()
    params = page.locator(f'tr[data-rule="{failing.id}"] .param')
    expect(params.filter(has_text="job_id")).to_have_text("job_id=flaky")  # the job, by name
    expect(params.filter(has_text="outcomes")).to_have_text("outcomes=failed,dead,timed_out")
    incident = page.locator("tr[data-incident]", has_text="sign-off")
    expect(incident.get_by_role("link", name="approval sign-off")).to_be_visible(
        timeout=ALERTED_WITHIN_MS
    )
    delivery = page.locator("tr[data-delivery]").first
    expect(delivery.locator(".standing")).to_contain_text(
        "could not connect to the receiver", timeout=ALERTED_WITHIN_MS
    )
    attempts = delivery.locator("details.history")
    expect(attempts.locator("summary")).to_have_text(re.compile(r"^\d+ attempts?$"))
    expect(attempts.locator("li").first).not_to_be_visible()  # folded until opened
    attempts.locator("summary").click()
    expect(attempts.locator("li").first).to_contain_text("could not connect")
    reject(cluster, started.id, "sign-off")
    for rule in (failing, waiting):
        herder.delete_alert_rule(rule.id)
    herder.delete_alert_channel(channel.id)


def test_an_empty_page_says_how_to_make_one(
    sign_in: Callable[[str], Page], herder: HerderClient
) -> None:
    tenant = herder.create_tenant("newcomer")
    tab = sign_in(herder.create_api_key(tenant.id, role="developer"))
    for page_name, command in [
        ("Jobs", "herder job create NAME --command 'echo hello'"),
        ("Workflows", "herder workflow create -f flow.yaml"),
        ("Schedules", "herder schedule create JOB '0 3 * * *'"),
        ("Limits", "herder limit create NAME --max-running 2"),
        ("Pools", "herder pool create NAME --share TENANT=cpu=8"),
    ]:
        tab.get_by_role("link", name=page_name, exact=True).click()
        expect(tab.locator(".empty code.command").first).to_have_text(command)
    tab.get_by_role("link", name="Alerts").click()
    expect(tab.locator(".empty code.command")).to_have_text(
        [
            "herder alert rule create NAME --kind run_failed --channel CHANNEL",
            "herder alert channel create NAME URL [--kind email|slack]",
        ]
    )


def test_the_pools_page_shows_shares_use_and_autoscaling(
    page: Page, herder: HerderClient, cluster: Cluster
) -> None:
    acme = herder.create_tenant("acme-pools")
    (own,) = [one for one in herder.list_tenants().items if one.is_system]
    autoscaling = {"worker": {"cpu": 8, "memory_mb": 32768}, "min_workers": 1, "max_workers": 4}
    shares = [{"tenant_id": acme.id, "cpu": 4, "memory_mb": 8192}, {"tenant_id": own.id}]
    spec = {"description": "the GPU boxes", "shares": shares, "autoscaling": autoscaling}
    pool = herder.create_pool("gpu", spec)
    cluster.start_worker("w-gpu", "--isolation", "none", "--cpu", "1", "--label", "pool=gpu")
    job = herder.create_job(
        "borrower",
        {"runtime": "shell", "command": "sleep 60", "pool": "gpu", "preemptible": True,
         "resources": {"cpu": 1, "memory_mb": 256}},
    )  # fmt: skip
    run = herder.start_run(job.id)
    page.get_by_role("link", name="Pools").click()
    row = page.locator('tr[data-pool="gpu"]')
    expect(row).to_contain_text("the GPU boxes")
    expect(row.locator(".share")).to_have_text(
        [f"{own.name}: borrowing only", "acme-pools: 4 cpu · 8192 MB"]  # by tenant id
    )
    expect(row.locator(".use")).to_have_text(  # a share of nothing: all it runs borrows
        [f"{own.name}: 1 attempt (1 borrowed) · 1 cpu · 256 MB"], timeout=ALERTED_WITHIN_MS
    )
    expect(row).to_contain_text("1 to 4 workers of 8 cpu · 32768 MB")
    expect(row.locator(".desired")).to_contain_text("running 1 run")
    herder.cancel_run(run.id)
    herder.wait(run.id, timeout=15)
    herder.delete_pool(pool.id)
