"""``herder event``, ``herder trigger`` and ``herder hook`` against the in-process API
(docs/events.md): a person sees at once what an event started, where a filter is wrong,
and a hook's URL and secret once."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from pathlib import Path

from typer.testing import CliRunner, Result

from herder.cli.common import app
from herder.cli.ids import short_ids
from herder.client import ApiError
from tests.integration.conftest import Api, Herder


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def test_an_event_sent_shows_the_run_its_trigger_started(
    api: Api, herder: Herder, tmp_path: Path
) -> None:
    api.create_job("build", parameters=[{"name": "BRANCH"}])
    ok(herder("trigger", "create", "on-main", "--event", "github.push", "--job", "build",
              "--filter", "payload.ref starts_with 'refs/heads/'",
              "--param", "BRANCH=payload.ref"))  # fmt: skip
    sent = ok(herder("event", "send", "github.push", "--payload", '{"ref": "refs/heads/main"}'))
    [run] = api.http.get("/v1/runs", headers=api.admin).json()["items"]
    assert f"trigger on-main: started run {run['id']}" in sent
    event_id = re.search(r"event (evt_\S+)", sent)
    assert event_id is not None
    payload = tmp_path / "payload.json"
    payload.write_text('{"ref": "v1.0"}')
    missed = ok(herder("event", "send", "github.push", "--payload-file", str(payload)))
    assert "no trigger matched: nothing was started" in missed
    # ``herder`` above left the client pointed at the app; this call pipes in the payload.
    piped = CliRunner().invoke(app, ["event", "send", "github.push", "-"], input='{"ref": "x"}')
    assert "no trigger matched" in ok(piped)
    shown = ok(herder("event", "show", event_id.group(1)))
    assert '"ref": "refs/heads/main"' in shown
    assert f"started run {run['id']}" in shown
    listed = ok(herder("event", "list", "--name", "github.push"))
    assert short_ids([event_id.group(1)])[event_id.group(1)] in listed
    assert herder("event", "send", "x", "--payload", "{not json").exit_code != 0


def test_an_event_whose_trigger_cannot_start_says_why_and_a_repeat_starts_nothing(
    api: Api, herder: Herder
) -> None:
    api.create_job("build", parameters=[{"name": "BRANCH"}])
    ok(herder("trigger", "create", "needs-ref", "--event", "push", "--job", "build",
              "--param", "BRANCH=payload.ref"))  # fmt: skip
    first = ok(herder("event", "send", "push", "--id", "delivery-1"))
    assert "trigger needs-ref: not started: params.BRANCH: payload.ref is not in the event" in first
    again = ok(herder("event", "send", "push", "--id", "delivery-1"))
    assert "already received under id delivery-1" in again
    assert "nothing was started again" in again


def test_a_bad_filter_is_shown_with_a_caret_under_the_character_the_server_names(
    api: Api, herder: Herder
) -> None:
    api.create_job("build")
    refused = herder("trigger", "create", "t", "--event", "push", "--job", "build",
                     "--filter", "payload.a == = 1")  # fmt: skip
    assert refused.exit_code == 1
    assert "unexpected character '=' (at character 14)" in refused.output
    assert "  payload.a == = 1\n               ^\n" in refused.output
    assert json.loads(ok(herder("trigger", "list", "--json")))["items"] == []


def test_triggers_are_listed_shown_changed_and_deleted(api: Api, herder: Herder) -> None:
    api.create_job("build")
    api.create_job("deploy")
    ok(herder("trigger", "create", "t", "--event", "push", "--job", "build",
              "--filter", "payload.tag in ['a', 'b']"))  # fmt: skip
    assert "payload.tag in ['a', 'b']" in ok(herder("trigger", "list"))
    changed = json.loads(
        ok(herder("trigger", "update", "t", "--disable", "--job", "deploy", "--no-filter",
                  "--json"))
    )  # fmt: skip
    assert (changed["enabled"], changed["job"], changed["filter"]) == (False, "deploy", None)
    assert "job deploy" in ok(herder("trigger", "show", "t"))
    assert herder("trigger", "update", "t").exit_code != 0
    bad = herder("trigger", "update", "t", "--filter", "payload.a >")
    assert "  payload.a >\n             ^\n" in bad.output
    ok(herder("trigger", "delete", "t"))
    missing = herder("trigger", "show", "t")
    assert isinstance(missing.exception, ApiError)
    assert missing.exception.status == 404


def test_a_hook_shows_its_url_and_secret_once_and_lists_its_deliveries(
    api: Api, herder: Herder
) -> None:
    api.create_job("build")
    created = ok(herder("hook", "create", "github", "--scheme", "github", "--rate", "5"))
    hook = api.http.get("/v1/hooks/github", headers=api.admin).json()
    assert f"URL:    http://testserver/v1/hooks/{api.tenant_id}.{hook['id']}" in created
    secret = re.search(r"secret: (whk_\S+)", created)
    assert secret is not None
    assert "will not be shown again" in created
    shown = ok(herder("hook", "show", "github"))
    assert f"http://testserver/v1/hooks/{api.tenant_id}.{hook['id']}" in shown
    assert secret.group(1) not in shown
    assert secret.group(1) not in ok(herder("hook", "list"))

    ok(herder("trigger", "create", "on-push", "--event", "github.push", "--job", "build"))
    body = b'{"ref": "refs/heads/main"}'
    digest = hmac.new(secret.group(1).encode(), body, hashlib.sha256).hexdigest()
    headers = {"X-Hub-Signature-256": f"sha256={digest}", "X-GitHub-Delivery": "gh-1",
               "X-GitHub-Event": "push", "Content-Type": "application/json"}  # fmt: skip
    accepted = api.http.post(hook["url"], content=body, headers=headers)
    assert accepted.status_code == 201, accepted.text
    forged_headers = {**headers, "X-GitHub-Delivery": "gh-2", "X-Hub-Signature-256": "sha256=00"}
    forged = api.http.post(hook["url"], content=body, headers=forged_headers)
    assert forged.status_code == 401
    listed = ok(herder("hook", "deliveries", "github"))
    event_id = accepted.json()["event"]["id"]
    accepted_row = next(line for line in listed.splitlines() if "gh-1" in line)
    assert short_ids([event_id])[event_id] in accepted_row
    assert " accepted " in accepted_row
    assert " 201 " in accepted_row
    rejected_row = next(line for line in listed.splitlines() if "rejected" in line)
    assert "401" in rejected_row
    assert "does not match" in rejected_row

    disabled = json.loads(ok(herder("hook", "update", "github", "--disable", "--json")))
    assert disabled["enabled"] is False
    ok(herder("hook", "delete", "github"))
    assert api.http.post(hook["url"], content=body, headers=headers).status_code == 404


def test_a_hook_made_with_the_senders_secret_never_prints_it(
    api: Api, herder: Herder, tmp_path: Path
) -> None:
    secret_file = tmp_path / "whsec"
    secret_file.write_text("whsec_0123456789abcdef\n")
    created = ok(herder("hook", "create", "stripe", "--scheme", "stripe",
                        "--secret-file", str(secret_file)))  # fmt: skip
    assert "whsec_0123456789abcdef" not in created
    assert "secret: the one you gave" in created
    short = herder("hook", "create", "weak", "--secret", "short")
    assert isinstance(short.exception, ApiError)
    assert "secret" in str(short.exception)
    rotated = ok(herder("hook", "rotate", "stripe"))
    assert "hook stripe has a new secret; its URL is unchanged" in rotated
    made = re.search(r"secret: (whk_\S+)", rotated)
    assert made is not None
    assert made.group(1) not in ok(herder("hook", "show", "stripe"))


def test_the_worked_example_a_github_push_starts_the_build_workflow(
    api: Api, herder: Herder, tmp_path: Path
) -> None:
    """docs/events.md's worked example, its commands as written there."""
    command = 'git clone --branch "${branch#refs/heads/}" "https://github.com/$repo" src && make'
    ok(herder("job", "create", "build", "--runtime", "shell", "--network", "--command", command))
    workflow = tmp_path / "build.yaml"
    workflow.write_text(
        "name: build\nparams: {branch: refs/heads/main, repo: acme/app, commit: HEAD}\n"
        "tasks:\n  - {name: build, job: build}\n"
    )
    ok(herder("workflow", "create", "-f", str(workflow)))
    created = ok(herder("hook", "create", "github", "--scheme", "github"))
    secret = re.search(r"secret: (whk_\S+)", created)
    url = re.search(r"URL:\s+http://testserver(\S+)", created)
    assert secret is not None
    assert url is not None
    ok(herder("trigger", "create", "build-on-push", "--event", "github.push", "--workflow", "build",
              "--filter", "payload.ref starts_with 'refs/heads/' and not payload.deleted",
              "--param", "branch=payload.ref", "--param", "repo=payload.repository.full_name",
              "--param", "commit=payload.after"))  # fmt: skip
    body = (
        b'{"ref":"refs/heads/main","after":"9f2c1e7","deleted":false,'
        b'"repository":{"full_name":"acme/app"}}'
    )
    digest = hmac.new(secret.group(1).encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/json", "X-GitHub-Event": "push",
        "X-GitHub-Delivery": "72d3162e", "X-Hub-Signature-256": f"sha256={digest}",
    }  # fmt: skip
    delivered = api.http.post(url.group(1), content=body, headers=headers)
    assert delivered.status_code == 201, delivered.text
    [outcome] = delivered.json()["event"]["outcomes"]
    run = api.http.get(f"/v1/workflow-runs/{outcome['workflow_run_id']}", headers=api.admin)
    assert run.json()["params"] == {"branch": "refs/heads/main", "repo": "acme/app",
                                    "commit": "9f2c1e7"}  # fmt: skip
    shown = ok(herder("event", "show", delivered.json()["event"]["id"]))
    assert f"trigger build-on-push: started workflow run {outcome['workflow_run_id']}" in shown
    assert api.http.post(url.group(1), content=body, headers=headers).status_code == 401
