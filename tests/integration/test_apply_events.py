"""``herder apply`` and ``herder export`` with triggers and hooks (the ``triggers`` and
``hooks`` sections, docs/events.md): triggers made after the jobs they start, changed in
place, pruned before them; a hook's secret read from the environment or made and printed
once, never written to a file."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pytest
import yaml

from tests.integration.conftest import Api, Herder
from tests.integration.test_apply import names, ok, refused

FILES = """
jobs:
  - name: build
    runtime: shell
    command: ./build.sh
    parameters: [{name: BRANCH}]
triggers:
  - name: on-push
    event: github.push
    job: build
    filter: payload.ref == 'refs/heads/main'
    params: {BRANCH: payload.ref}
"""
HOOKS = """
hooks:
  - name: github
    scheme: github
    event: github
    rate_per_second: 5
    secret_from: GITHUB_HOOK_SECRET
  - name: ours
"""
SECRET = "from-the-environment-0123456789"


def test_apply_makes_triggers_after_their_jobs_diffs_them_and_prunes_them(
    api: Api, herder: Herder, tmp_path: Path
) -> None:
    path = tmp_path / "herder.yaml"
    path.write_text(FILES)
    first = ok(herder("apply", "-f", str(path)))
    assert first.index("+ job build") < first.index("+ trigger on-push")
    sent = api.http.post(
        "/v1/events", headers=api.admin,
        json={"name": "github.push", "payload": {"ref": "refs/heads/main"}},
    )  # fmt: skip
    assert sent.json()["event"]["outcomes"][0]["run_id"] is not None
    assert "trigger on-push" not in ok(herder("apply", "-f", str(path)))

    path.write_text(FILES.replace("refs/heads/main", "refs/heads/release"))
    planned = ok(herder("apply", "-f", str(path), "--dry-run"))
    assert "~ trigger on-push" in planned
    assert (
        "    filter: \"payload.ref == 'refs/heads/main'\" → \"payload.ref == 'refs/heads/release'\""
        in planned
    )
    assert (
        "payload.ref == 'refs/heads/main'"
        in api.http.get("/v1/triggers/on-push", headers=api.admin).json()["filter"]
    )
    ok(herder("apply", "-f", str(path)))
    exported = yaml.safe_load(ok(herder("export")))
    assert exported["triggers"] == [
        {"name": "on-push", "event": "github.push", "filter": "payload.ref == 'refs/heads/release'",
         "job": "build", "params": {"BRANCH": "payload.ref"}}
    ]  # fmt: skip

    path.write_text("triggers: []\n")
    pruned = ok(herder("apply", "-f", str(path), "--prune"))
    assert "- trigger on-push" in pruned
    assert names(api, "triggers") == []
    assert names(api, "jobs") == ["build"]  # the file has no jobs section: jobs are kept


def test_a_trigger_naming_no_job_and_a_prune_that_would_strand_one_are_refused(
    api: Api, herder: Herder, tmp_path: Path
) -> None:
    path = tmp_path / "herder.yaml"
    path.write_text("triggers:\n  - {name: t, event: push, job: nowhere}\n")
    said = refused(herder("apply", "-f", str(path)))
    assert "triggers[0].job: no job named 'nowhere'" in said
    path.write_text(FILES)
    ok(herder("apply", "-f", str(path)))
    path.write_text("jobs: []\n")
    said = refused(herder("apply", "-f", str(path), "--prune"))
    assert "trigger 'on-push' on the server runs job 'build'" in said
    assert names(api, "jobs") == ["build"]
    path.write_text("triggers:\n  - {name: t, event: push, job: build, filter: 'payload.a =='}\n")
    said = refused(herder("apply", "-f", str(path)))
    assert "triggers[0].filter" in said
    assert "(at character" in said
    path.write_text(
        FILES.replace("params: {BRANCH: payload.ref}", "params: {BRANCHES: payload.ref}")
    )
    said = refused(herder("apply", "-f", str(path)))
    assert "triggers[0].params.BRANCHES: 'BRANCHES' is not a parameter of job build" in said


def test_apply_makes_hooks_with_the_secret_from_the_environment_or_a_new_one_shown_once(
    api: Api, herder: Herder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "hooks.yaml"
    path.write_text(HOOKS)
    monkeypatch.delenv("GITHUB_HOOK_SECRET", raising=False)
    said = refused(herder("apply", "-f", str(path)))
    assert "hooks[0].secret_from: the environment variable GITHUB_HOOK_SECRET is not set" in said
    assert names(api, "hooks") == []

    monkeypatch.setenv("GITHUB_HOOK_SECRET", SECRET)
    planned = ok(herder("apply", "-f", str(path), "--dry-run"))
    assert "+ hook github (its secret from $GITHUB_HOOK_SECRET)" in planned
    assert "+ hook ours (a new secret, shown once)" in planned
    applied = ok(herder("apply", "-f", str(path)))
    github = api.http.get("/v1/hooks/github", headers=api.admin).json()
    assert f"hook github: URL http://testserver/v1/hooks/{api.tenant_id}.{github['id']}" in applied
    assert SECRET not in applied
    assert "secret whk_" in applied
    assert "will not be shown again" in applied
    assert _github_delivery(api, github["url"], SECRET, "d-1") == 201

    path.write_text(HOOKS.replace("rate_per_second: 5", "rate_per_second: 7"))
    planned = ok(herder("apply", "-f", str(path), "--dry-run"))
    assert "~ hook github\n    rate_per_second: 5.0 → 7.0" in planned
    ok(herder("apply", "-f", str(path)))
    changed = api.http.get("/v1/hooks/github", headers=api.admin).json()
    assert (changed["id"], changed["rate_per_second"]) == (github["id"], 7.0)
    assert _github_delivery(api, github["url"], SECRET, "d-2") == 201  # the same secret holds

    exported_text = ok(herder("export"))
    assert SECRET not in exported_text
    assert "secret" not in exported_text
    assert yaml.safe_load(exported_text)["hooks"] == [
        {"name": "github", "scheme": "github", "rate_per_second": 7.0},
        {"name": "ours"},
    ]
    everything = tmp_path / "all.yaml"
    everything.write_text(exported_text)
    again = ok(herder("apply", "-f", str(everything), "--dry-run", "--prune"))
    assert "hook" not in again.split("dry run")[0]

    path.write_text("hooks:\n  - name: github\n    scheme: github\n")
    pruned = ok(herder("apply", "-f", str(path), "--prune"))
    assert "- hook ours" in pruned
    assert names(api, "hooks") == ["github"]


def test_a_secret_written_in_a_file_or_too_short_in_the_environment_is_refused(
    api: Api, herder: Herder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "hooks.yaml"
    path.write_text("hooks:\n  - {name: leaky, secret: whsec_0123456789abcdef}\n")
    said = refused(herder("apply", "-f", str(path)))
    assert "hooks[0].secret: a secret is never written in a file" in said
    monkeypatch.setenv("SHORT_SECRET", "short")
    path.write_text("hooks:\n  - {name: weak, secret_from: SHORT_SECRET}\n")
    said = refused(herder("apply", "-f", str(path)))
    assert "hooks[0].secret_from: the secret in SHORT_SECRET: String should have at least" in said
    assert names(api, "hooks") == []


def _github_delivery(api: Api, url: str, secret: str, delivery: str) -> int:
    body = json.dumps({"ref": "refs/heads/main", "after": delivery}).encode()  # a body once
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    headers = {"X-Hub-Signature-256": f"sha256={digest}", "X-GitHub-Event": "push",
               "X-GitHub-Delivery": delivery}  # fmt: skip
    status: int = api.http.post(url, content=body, headers=headers).status_code
    return status
