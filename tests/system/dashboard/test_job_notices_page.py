"""The job page's "Notify me" in a real browser (docs/alerts.md, "A job's notices"): an
operator subscribes with the four checkboxes and an address, sees what they get after a
reload, has a refusal shown beside the field it names (the address, the events), and stops
them; a viewer is offered none of it (the browser and server: conftest)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from herder.client import ApiError, HerderClient
from tests.system.dashboard.conftest import ATTACK, reloaded

pytestmark = pytest.mark.system


def test_an_operator_subscribes_to_a_jobs_notices_from_its_page(
    sign_in: Callable[[str], Page], herder: HerderClient
) -> None:
    tenant = herder.create_tenant("notices")
    with HerderClient(herder.url, herder.create_api_key(tenant.id, role="admin")) as admin:
        job = admin.create_job("nightly", {"runtime": "shell", "command": "true"})
    key = herder.create_api_key(tenant.id, role="operator")
    page = sign_in(key)
    page.goto(f"/#/jobs/{job.id}")
    form = page.get_by_role("form", name="Notify me")
    status = page.locator("p[data-notices]")
    expect(status).to_have_text("You get no notices of this job.")
    expect(form.get_by_label("Failed")).to_be_checked()

    # a hostile address: refused beside "To", shown as text
    form.get_by_label("To").fill(ATTACK)
    form.get_by_role("button", name="Save notices").click()
    expect(form.locator('.field-error[data-field="to"]')).to_contain_text("alert channel")
    assert page.evaluate("window.__pwned") is None

    # no event: refused beside the first checkbox (the API names "on")
    form.get_by_label("Failed").uncheck()
    form.get_by_label("To").fill("mailto:me@example.com")
    form.get_by_role("button", name="Save notices").click()
    expect(form.locator('.field-error[data-field="on-failed"]')).not_to_be_empty()

    form.get_by_label("Failed").check()
    form.get_by_label("Timed out").check()
    form.get_by_role("button", name="Save notices").click()
    expect(status).to_have_text(
        "You are told when its runs: failed, timed out — at mailto:me@example.com."
    )
    with HerderClient(herder.url, key) as operator:
        assert operator.job_notices(job.id).on == ["failed", "timed_out"]

    reloaded(page)
    form = page.get_by_role("form", name="Notify me")
    expect(form.get_by_label("Timed out")).to_be_checked()
    expect(form.get_by_label("Missed their deadline")).not_to_be_checked()
    expect(form.get_by_label("To")).to_have_value("mailto:me@example.com")

    form.get_by_role("button", name="Stop notices").click()
    expect(status).to_have_text("You get no notices of this job.")
    with HerderClient(herder.url, key) as operator, pytest.raises(ApiError) as none:
        operator.job_notices(job.id)
    assert none.value.status == 404

    viewer = sign_in(herder.create_api_key(tenant.id, role="viewer"))
    viewer.goto(f"/#/jobs/{job.id}")
    expect(viewer.get_by_role("heading", name="Job nightly")).to_be_visible()
    expect(viewer.get_by_role("form", name="Notify me")).to_have_count(0)
