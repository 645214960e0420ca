"""The admin console, in a real browser: limits, pools, budgets, alert channels and rules,
triggers and hooks made, listed, edited (a stale edit of an ETag'd one saying so), refused
by their field (a clear error, never a 500) and deleted, each offered only to a key that
may; a hook's secret shown once; hostile text shown as text; each page's form usable at a
phone's width (the browser and server: conftest)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from playwright.sync_api import Locator, Page, Response, ViewportSize, expect

from herder.client import HerderClient
from herder.client.errors import ApiError
from herder.domain.alerts.rules import PARAMS_OF_KIND
from herder.domain.budgets import TenantBudgets
from tests.system.conftest import Cluster
from tests.system.dashboard.conftest import ATTACK, SignIn, reloaded

pytestmark = pytest.mark.system

DESKTOP = ViewportSize(width=1280, height=800)
PHONE = ViewportSize(width=390, height=844)
STALE = "Someone changed this since you opened it"


@dataclass(frozen=True)
class Tenant:
    """A tenant of its own (a clean slate on the module's server): its admin's client and key."""

    admin: HerderClient
    key: str
    id: str
    name: str


@pytest.fixture
def tenant(cluster: Cluster) -> Iterator[Tenant]:
    with cluster.client() as system_admin:
        made = system_admin.create_tenant(f"console-{uuid.uuid4().hex[:10]}")
        key = system_admin.create_api_key(made.id, role="admin")
    with HerderClient(cluster.url, key) as admin:
        yield Tenant(admin, key, made.id, made.name)


def opened(sign_in: SignIn, key: str, at: str) -> Page:
    tab = sign_in(key)
    tab.set_viewport_size(DESKTOP)
    tab.on("dialog", lambda dialog: dialog.accept())  # the deletes' confirmations
    tab.goto(f"/#/{at}")
    return tab


def refused_beside(form: Locator, field: str, text: str) -> None:
    expect(form.locator(f'.field-error[data-field="{field}"]')).to_contain_text(text)


def fits_a_phone(tab: Page, form: Locator) -> None:
    """At a phone's width the form is shown and usable, and nothing is wider than the screen."""
    tab.set_viewport_size(PHONE)
    expect(form).to_be_visible()
    form.get_by_role("button").last.scroll_into_view_if_needed()
    expect(form.get_by_role("button").last).to_be_in_viewport()
    assert tab.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    tab.set_viewport_size(DESKTOP)


def unharmed(tab: Page) -> None:
    assert tab.evaluate("window.__pwned") is None


def watched(tab: Page, server_errors: list[str]) -> Page:
    """Notes every answer of 500 or more the tab gets."""

    def note(answer: Response) -> None:
        if answer.status >= 500:
            server_errors.append(f"{answer.status} {answer.url}")

    tab.on("response", note)
    return tab


def gone(read: Callable[[], object]) -> None:
    with pytest.raises(ApiError) as refused:
        read()
    assert refused.value.status == 404


def test_a_limit_is_made_edited_refused_when_stale_and_deleted(
    sign_in: SignIn, tenant: Tenant
) -> None:
    admin, key = tenant.admin, tenant.key
    tab = opened(sign_in, key, "limits")
    form = tab.get_by_role("form", name="New limit")
    form.locator("#new-limit-name").fill(ATTACK)
    form.locator("#new-limit-max_running").fill("2")
    form.get_by_role("button", name="Create limit").click()
    refused_beside(form, "name", "")
    expect(form.locator('.field-error[data-field="name"]')).not_to_be_empty()
    form.locator("#new-limit-name").fill("per-account")
    form.locator("#new-limit-description").fill(ATTACK)
    form.locator("#new-limit-rate_count").fill("0")
    form.locator("#new-limit-rate_period").fill("60")
    form.get_by_role("button", name="Create limit").click()
    refused_beside(form, "rate_count", "greater than or equal to 1")
    form.locator("#new-limit-rate_count").fill("10")
    form.get_by_role("button", name="Create limit").click()
    expect(form.locator(".form-banner")).to_have_text("Created limit per-account.")
    listed = tab.locator('tr[data-limit="per-account"]')
    expect(listed).to_contain_text("2 running per key; 10 starts per 60 s")
    expect(listed).to_contain_text(ATTACK)  # as text
    unharmed(tab)
    fits_a_phone(tab, form)

    listed.get_by_role("link", name="per-account").click()
    edit = tab.get_by_role("form", name="Edit limit")
    expect(edit.locator("#edit-limit-max_running")).to_have_value("2")
    edit.locator("#edit-limit-max_running").fill("3")
    edit.locator("#edit-limit-rate_count").fill("")
    edit.locator("#edit-limit-rate_period").fill("")
    edit.get_by_role("button", name="Save").click()
    expect(edit.locator(".form-banner")).to_contain_text("Saved limit per-account (version 2)")
    saved = admin.get_limit("per-account")
    assert (saved.max_running, saved.rate) == (3, None)
    edit.locator("#edit-limit-max_running").fill("4")  # a second edit from the same reading
    edit.get_by_role("button", name="Save").click()
    expect(edit.locator(".form-banner")).to_contain_text("(version 3)")

    admin.update_limit("per-account", {"max_running": 9})  # someone else, meanwhile
    edit.locator("#edit-limit-max_running").fill("5")
    edit.get_by_role("button", name="Save").click()
    expect(edit.locator(".form-banner.error")).to_contain_text(STALE)
    assert admin.get_limit("per-account").max_running == 9

    tab.get_by_role("button", name="Delete").click()
    expect(tab.get_by_role("heading", name="Limits")).to_be_visible()
    expect(tab.locator('tr[data-limit="per-account"]')).to_have_count(0)
    gone(lambda: admin.get_limit("per-account"))


def test_pools_and_budgets_are_a_system_admins_to_change(
    sign_in: SignIn, cluster: Cluster, tenant: Tenant
) -> None:
    admin, key = tenant.admin, tenant.key
    tenant_id, tenant_name = tenant.id, tenant.name
    pool_name = f"pool-{uuid.uuid4().hex[:8]}"
    tab = opened(sign_in, cluster.credentials["api_key"], "pools")
    form = tab.get_by_role("form", name="New pool")
    form.locator("#new-pool-name").fill(pool_name)
    form.locator("#new-pool-shares").fill(f"{tenant_name} cpu=lots")
    form.get_by_role("button", name="Create pool").click()
    refused_beside(form, "shares", "line 1")
    form.locator("#new-pool-shares").fill(f"{tenant_name} cpu=4 memory_mb=8192")
    form.get_by_role("button", name="Create pool").click()
    expect(form.locator(".form-banner")).to_have_text(f"Created pool {pool_name}.")
    listed = tab.locator(f'tr[data-pool="{pool_name}"]')
    expect(listed).to_contain_text(f"{tenant_name}: 4 cpu · 8192 MB")
    fits_a_phone(tab, form)

    listed.get_by_role("button", name="Edit").click()
    edit = tab.get_by_role("form", name=f"Edit pool {pool_name}")
    edit.locator("#edit-pool-description").fill(ATTACK)
    edit.locator("#edit-pool-max_workers").fill("3")  # autoscaling needs its worker's shape
    edit.get_by_role("button", name="Save").click()
    refused_beside(edit, "worker_cpu", "required")
    edit.locator("#edit-pool-max_workers").fill("")
    edit.get_by_role("button", name="Save").click()
    expect(edit.locator(".form-banner")).to_have_text(f"Saved pool {pool_name}.")
    expect(listed).to_contain_text(ATTACK)
    unharmed(tab)
    listed.get_by_role("button", name="Delete").click()
    expect(listed).to_have_count(0)

    tab.goto("/#/usage")
    budgets = tab.get_by_role("form", name="Set budgets")
    budgets.locator("#budgets-tenant").select_option(label=tenant_name)
    budgets.locator("#budgets-budgets").fill("day cpu_seconds=-5")
    budgets.get_by_role("button", name="Set budgets").click()
    refused_beside(
        budgets, "budgets", "line 1: cpu_seconds: Input should be greater than or equal to 0"
    )
    budgets.locator("#budgets-time_zone").fill("Mars/Olympus")
    budgets.locator("#budgets-budgets").fill("day cpu_seconds=3600 hard")
    budgets.get_by_role("button", name="Set budgets").click()
    refused_beside(budgets, "time_zone", "unknown time zone")
    budgets.locator("#budgets-time_zone").fill("Europe/Paris")
    budgets.get_by_role("button", name="Set budgets").click()
    expect(budgets.locator(".form-banner")).to_have_text("Set 1 budget (Europe/Paris).")
    assert admin.get_budgets(tenant_id) == TenantBudgets.model_validate(
        {
            "time_zone": "Europe/Paris",
            "budgets": [{"period": "day", "cpu_seconds": 3600, "hard": True}],
        }
    )
    fits_a_phone(tab, budgets)

    # a tenant's own admin sees its budgets and pools, and no form to change them
    own = opened(sign_in, key, "usage")
    expect(own.get_by_text("Budgets are set by a system admin.")).to_be_visible()
    expect(own.locator("[data-spent]")).to_have_count(1)
    expect(own.locator("form.edit-form")).to_have_count(0)
    own.goto("/#/pools")
    expect(own.get_by_role("heading", name="Pools")).to_be_visible()
    expect(own.locator("form.edit-form")).to_have_count(0)
    expect(own.get_by_role("button", name="Edit")).to_have_count(0)


def test_alert_channels_and_rules_are_made_edited_and_deleted(
    sign_in: SignIn, tenant: Tenant
) -> None:
    admin, key = tenant.admin, tenant.key
    tab = opened(sign_in, key, "alerts")
    held = tab.evaluate("import('./ui/views/alert_forms.js').then((forms) => forms.PARAMS_OF_KIND)")
    assert {kind: sorted(names) for kind, names in held.items()} == {
        kind.value: sorted(names) for kind, names in PARAMS_OF_KIND.items()
    }

    tab.get_by_role("button", name="New channel").click()
    form = tab.get_by_role("form", name="New channel")
    form.locator("#new-channel-name").fill("ops")
    form.locator("#new-channel-url").fill("ftp://example.com/x")
    form.get_by_role("button", name="Create channel").click()
    expect(form.locator('.field-error[data-field="url"]')).not_to_be_empty()
    form.locator("#new-channel-url").fill("http://127.0.0.1:9/hook")
    form.get_by_role("button", name="Create channel").click()
    secret = tab.locator("[data-secret]")
    expect(secret).not_to_be_empty()
    channel = admin.list_alert_channels().items[0]
    channel_row = tab.locator(f'tr[data-channel="{channel.id}"]')
    expect(channel_row).to_contain_text("ops")

    tab.get_by_role("button", name="New rule").click()
    rule_form = tab.get_by_role("form", name="New rule")
    rule_form.locator("#new-rule-name").fill("slow-queue")
    rule_form.locator("#new-rule-kind").select_option("queue_wait_p99")
    expect(rule_form.locator("#new-rule-threshold_seconds")).to_be_visible()
    expect(rule_form.locator("#new-rule-job_id")).to_be_hidden()
    rule_form.locator("#new-rule-threshold_seconds").fill("-1")
    rule_form.locator("#new-rule-channel_ids").select_option(label="ops (webhook)")
    rule_form.get_by_role("button", name="Create rule").click()
    refused_beside(rule_form, "threshold_seconds", "greater than 0")
    rule_form.locator("#new-rule-threshold_seconds").fill("30")
    rule_form.get_by_role("button", name="Create rule").click()
    expect(rule_form.locator(".form-banner")).to_have_text("Created rule slow-queue.")
    rule = admin.list_alert_rules().items[0]
    assert (rule.kind, rule.params["threshold_seconds"], rule.channel_ids) == (
        "queue_wait_p99",
        30,
        [channel.id],
    )
    rule_form.locator("#new-rule-kind").select_option("run_failed")
    expect(rule_form.locator("#new-rule-job_id")).to_be_visible()
    expect(rule_form.locator("#new-rule-threshold_seconds")).to_be_hidden()
    rule_form.locator("#new-rule-name").fill("build-fails")
    rule_form.locator("#new-rule-job_id").fill("no-such-job")
    rule_form.get_by_role("button", name="Create rule").click()
    refused_beside(rule_form, "job_id", "no job no-such-job")
    job = admin.create_job("build", {"runtime": "shell", "command": "true"})
    rule_form.locator("#new-rule-job_id").fill("build")  # a job by its name
    rule_form.get_by_role("button", name="Create rule").click()
    expect(rule_form.locator(".form-banner")).to_have_text("Created rule build-fails.")
    (by_name,) = admin.list_alert_rules(name="build-fails").items
    assert by_name.params["job_id"] == job.id
    fits_a_phone(tab, rule_form)

    rule_row = tab.locator(f'tr[data-rule="{rule.id}"]')
    rule_row.get_by_role("button", name="Edit").click()
    edit = tab.get_by_role("form", name="Edit rule slow-queue")
    expect(edit.locator("#edit-rule-threshold_seconds")).to_have_value("30")
    edit.locator("#edit-rule-threshold_seconds").fill("45")
    edit.locator("#edit-rule-notify_recovery").uncheck()
    edit.get_by_role("button", name="Save").click()
    expect(edit.locator(".form-banner")).to_have_text("Saved rule slow-queue.")
    (changed,) = admin.list_alert_rules(name="slow-queue").items
    assert (changed.params["threshold_seconds"], changed.notify_recovery) == (45, False)

    channel_row.get_by_role("button", name="Edit").click()
    channel_edit = tab.get_by_role("form", name="Edit channel ops")
    channel_edit.locator("#edit-channel-name").fill("pager")
    channel_edit.get_by_role("button", name="Save").click()
    expect(channel_row).to_contain_text("pager")

    rule_row.get_by_role("button", name="Delete").click()
    expect(rule_row).to_have_count(0)
    channel_row.get_by_role("button", name="Delete").click()
    expect(channel_row).to_have_count(0)
    reloaded(tab)
    expect(tab.get_by_role("heading", name="Alerts")).to_be_visible()
    expect(tab.locator("[data-secret]")).to_have_count(0)  # shown once, never again


def test_a_trigger_and_a_hook_are_made_edited_refused_when_stale_and_deleted(
    sign_in: SignIn, cluster: Cluster, tenant: Tenant
) -> None:
    admin, key = tenant.admin, tenant.key
    admin.create_job(
        "build", {"runtime": "shell", "command": "true", "parameters": [{"name": "BRANCH"}]}
    )
    tab = opened(sign_in, key, "triggers")
    form = tab.get_by_role("form", name="New trigger")
    form.locator("#new-trigger-name").fill("build-main")
    form.locator("#new-trigger-event").fill("github.push")
    form.locator("#new-trigger-target_name").fill("nope")
    form.get_by_role("button", name="Create trigger").click()
    expect(form.locator('.field-error[data-field="target_name"]')).not_to_be_empty()
    form.locator("#new-trigger-target_name").fill("build")
    form.locator("#new-trigger-filter").fill("payload.ref ==")
    form.locator("#new-trigger-params").fill("BRANCH=payload.ref")
    form.get_by_role("button", name="Create trigger").click()
    expect(form.locator('.field-error[data-field="filter"]')).not_to_be_empty()
    form.locator("#new-trigger-filter").fill("payload.ref == 'refs/heads/main'")
    form.get_by_role("button", name="Create trigger").click()
    expect(form.locator(".form-banner")).to_have_text("Created trigger build-main.")
    listed = tab.locator('tr[data-trigger="build-main"]')
    expect(listed).to_contain_text("job build")
    fits_a_phone(tab, form)

    listed.get_by_role("link", name="build-main").click()
    edit = tab.get_by_role("form", name="Edit trigger")
    edit.locator("#edit-trigger-filter").fill("")
    edit.get_by_role("button", name="Save").click()
    expect(edit.locator(".form-banner")).to_contain_text("(version 2)")
    assert admin.get_trigger("build-main").filter is None
    admin.update_trigger("build-main", {"enabled": False})
    edit.locator("#edit-trigger-params").fill("BRANCH='main'")
    edit.get_by_role("button", name="Save").click()
    expect(edit.locator(".form-banner.error")).to_contain_text(STALE)
    tab.get_by_role("button", name="Delete").click()
    expect(tab.get_by_role("heading", name="Triggers")).to_be_visible()  # deleted, then listed
    expect(tab.locator('tr[data-trigger="build-main"]')).to_have_count(0)
    gone(lambda: admin.get_trigger("build-main"))

    tab.goto("/#/hooks")
    form = tab.get_by_role("form", name="New hook")
    form.locator("#new-hook-name").fill(ATTACK)
    form.get_by_role("button", name="Create hook").click()
    expect(form.locator('.field-error[data-field="name"]')).not_to_be_empty()
    unharmed(tab)
    form.locator("#new-hook-name").fill("gh")
    form.locator("#new-hook-scheme").select_option("github")
    form.locator("#new-hook-rate_per_second").fill("0")
    form.get_by_role("button", name="Create hook").click()
    refused_beside(form, "rate_per_second", "greater than 0")
    form.locator("#new-hook-rate_per_second").fill("5")
    form.get_by_role("button", name="Create hook").click()
    panel = tab.get_by_role("region", name="Signing secret of hook gh")
    expect(panel.locator("[data-secret]")).not_to_be_empty()
    hook = admin.get_hook("gh")
    expect(panel.locator(".hook-url")).to_have_text(f"{cluster.url}{hook.url}")
    panel.get_by_role("button", name="Copy").click()
    expect(panel.get_by_role("status")).not_to_be_empty()
    first = panel.locator("[data-secret]").inner_text()
    listed = tab.locator('tr[data-hook="gh"]')
    expect(listed).to_contain_text("github")
    fits_a_phone(tab, form)

    listed.get_by_role("link", name="gh").click()
    expect(tab.locator("[data-secret]")).to_have_count(0)
    edit = tab.get_by_role("form", name="Edit hook")
    edit.locator("#edit-hook-burst").fill("20")
    edit.get_by_role("button", name="Save").click()
    expect(edit.locator(".form-banner")).to_contain_text("(version 2)")
    assert admin.get_hook("gh").burst == 20
    admin.update_hook("gh", {"enabled": False})
    edit.locator("#edit-hook-burst").fill("30")
    edit.get_by_role("button", name="Save").click()
    expect(edit.locator(".form-banner.error")).to_contain_text(STALE)
    tab.get_by_role("button", name="New secret").click()
    rotated = tab.get_by_role("region", name="Signing secret of hook gh").locator("[data-secret]")
    expect(rotated).not_to_be_empty()
    assert rotated.inner_text() != first
    reloaded(tab)
    expect(tab.get_by_role("heading", name="Hook gh")).to_be_visible()
    expect(tab.locator("[data-secret]")).to_have_count(0)  # shown once, never again
    tab.get_by_role("button", name="Delete").click()
    expect(tab.get_by_role("heading", name="Hooks")).to_be_visible()  # deleted, then listed
    expect(tab.locator('tr[data-hook="gh"]')).to_have_count(0)
    gone(lambda: admin.get_hook("gh"))


def test_a_viewer_is_offered_no_form(
    sign_in: Callable[[str], Page], cluster: Cluster, tenant: Tenant
) -> None:
    admin = tenant.admin
    admin.create_limit("per-user", {"max_running": 1})
    admin.create_job("build", {"runtime": "shell", "command": "true"})
    admin.create_trigger("on-push", {"event": "push", "job": "build"})
    admin.create_hook("inbound", {})
    channel = admin.create_alert_channel("pager", "http://127.0.0.1:9/hook")
    with cluster.client() as system_admin:
        viewer = system_admin.create_api_key(tenant.id, role="viewer")
    tab = sign_in(viewer)
    for at, shown in [
        ("limits", 'tr[data-limit="per-user"]'),
        ("limits/per-user", "h1:has-text('Limit per-user')"),
        ("triggers", 'tr[data-trigger="on-push"]'),
        ("triggers/on-push", "h1:has-text('Trigger on-push')"),
        ("hooks", 'tr[data-hook="inbound"]'),
        ("hooks/inbound", "h1:has-text('Hook inbound')"),
        ("alerts", f'tr[data-channel="{channel.id}"]'),
        ("pools", "h1:has-text('Pools')"),
        ("usage", "h1:has-text('Usage')"),
    ]:
        tab.goto(f"/#/{at}")
        expect(tab.locator(shown)).to_be_visible()
        expect(tab.locator("form.edit-form")).to_have_count(0)
        expect(tab.get_by_role("button", name="Delete")).to_have_count(0)
        expect(tab.get_by_role("button", name="Edit")).to_have_count(0)


def test_hostile_input_to_each_form_gets_a_clear_error(
    sign_in: SignIn, cluster: Cluster, tenant: Tenant
) -> None:
    server_errors: list[str] = []
    tab = watched(opened(sign_in, cluster.credentials["api_key"], "pools"), server_errors)
    form = tab.get_by_role("form", name="New pool")
    form.locator("#new-pool-name").fill("hostile")
    for value in (
        "ten_nosuch cpu=1",
        f"{tenant.name} cpu=1e999",
        f"{tenant.name} cpu=1 {ATTACK}=1",
    ):
        form.locator("#new-pool-shares").fill(value)
        form.get_by_role("button", name="Create pool").click()
        expect(form.locator('.field-error[data-field="shares"]')).to_contain_text("line 1")
    tab.goto("/#/usage")
    budgets = tab.get_by_role("form", name="Set budgets")
    budgets.locator("#budgets-tenant").select_option(label=tenant.name)
    budgets.locator("#budgets-budgets").fill(f"day cpu_seconds=1 pool={ATTACK}")
    budgets.get_by_role("button", name="Set budgets").click()
    expect(budgets.locator('.field-error[data-field="budgets"]')).to_contain_text("line 1")

    own = watched(opened(sign_in, tenant.key, "limits"), server_errors)
    form = own.get_by_role("form", name="New limit")
    form.locator("#new-limit-name").fill("../../etc")
    form.locator("#new-limit-max_running").fill("1e9")
    form.get_by_role("button", name="Create limit").click()
    expect(form.locator(".field-error:not(:empty), .form-banner.error").first).to_be_visible()
    own.goto("/#/triggers")
    form = own.get_by_role("form", name="New trigger")
    form.locator("#new-trigger-name").fill("t")
    form.locator("#new-trigger-target_name").fill("build")
    form.locator("#new-trigger-event").fill(ATTACK)
    form.get_by_role("button", name="Create trigger").click()
    expect(form.locator('.field-error[data-field="event"]')).not_to_be_empty()
    form.locator("#new-trigger-event").fill("push")
    form.locator("#new-trigger-params").fill("A=\nB=payload.x")
    form.get_by_role("button", name="Create trigger").click()
    expect(form.locator(".field-error:not(:empty), .form-banner.error").first).to_be_visible()
    own.goto("/#/hooks")
    form = own.get_by_role("form", name="New hook")
    form.locator("#new-hook-name").fill("h")
    form.locator("#new-hook-secret").fill("short")
    form.get_by_role("button", name="Create hook").click()
    expect(form.locator('.field-error[data-field="secret"]')).not_to_be_empty()
    form.locator("#new-hook-secret").fill("")
    form.locator("#new-hook-event").fill(ATTACK)
    form.get_by_role("button", name="Create hook").click()
    expect(form.locator('.field-error[data-field="event"]')).not_to_be_empty()
    own.goto("/#/alerts")
    own.get_by_role("button", name="New channel").click()
    form = own.get_by_role("form", name="New channel")
    form.locator("#new-channel-name").fill("x")
    form.locator("#new-channel-url").fill("javascript:alert(1)")
    form.get_by_role("button", name="Create channel").click()
    expect(form.locator('.field-error[data-field="url"]')).not_to_be_empty()
    form.locator("#new-channel-kind").select_option("email")
    form.locator("#new-channel-url").fill("mailto:a@example.com%0ABcc:b@example.com")
    form.get_by_role("button", name="Create channel").click()
    expect(form.locator('.field-error[data-field="url"]')).not_to_be_empty()
    own.get_by_role("button", name="New rule").click()
    form = own.get_by_role("form", name="New rule")
    form.locator("#new-rule-name").fill("r")
    form.locator("#new-rule-job_id").fill("../../v1/keys")
    form.get_by_role("button", name="Create rule").click()
    expect(form.locator('.field-error[data-field="job_id"]')).not_to_be_empty()
    unharmed(tab)
    unharmed(own)
    assert server_errors == []
