"""Runs' checkpoints on the server: the worker holding a run's current attempt saves it, the
worker holding its next attempt restores it, the run's tenant reads, downloads or deletes it;
a zombie, another worker or another tenant gets nothing, and it is gone once the run ended."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, update

from herder.domain.models import Role
from herder.store.checkpoints import CheckpointRepository
from herder.store.cold.blobs import DirectoryBlobStore
from herder.store.schema import checkpoint_chunks, checkpoint_contents, checkpoints
from tests.integration.conftest import Api
from tests.integration.registered import as_worker, register_worker
from tests.integration.test_placement import heartbeat, run
from tests.integration.test_suspend import act, stopped
from tests.integration.test_worker_protocol import claim, completion, report

SAVED = b"\x1f\x8b" + b"a saved step\x00" * 1000  # bytes, NULs included: never unpacked here


def save(api: Api, worker: str, assignment: dict[str, Any], content: bytes) -> Any:
    return api.http.put(
        f"/v1/workers/{worker}/attempts/{assignment['attempt_id']}/checkpoint",
        params={"attempt": assignment["attempt"]},
        content=content,
        headers={**as_worker(worker), "Content-Type": "application/octet-stream"},
    )


def fetch(api: Api, worker: str, assignment: dict[str, Any]) -> Any:
    return api.http.get(
        f"/v1/workers/{worker}/attempts/{assignment['attempt_id']}/checkpoint",
        params={"attempt": assignment["attempt"]},
        headers=as_worker(worker),
    )


def info(api: Api, run_id: str, headers: dict[str, str] | None = None) -> Any:
    return api.http.get(f"/v1/runs/{run_id}/checkpoint", headers=headers or api.admin)


def suspended_and_resumed(api: Api, worker: str, assignment: dict[str, Any]) -> dict[str, Any]:
    """Suspend the run of ``assignment``, report its attempt stopped, resume it: its next
    attempt's assignment."""
    act(api, assignment["run_id"], "suspend")
    assert heartbeat(api, worker, assignment)["preempt"] == [assignment["attempt_id"]]
    report(api, worker, completions=[stopped(assignment)])
    assert act(api, assignment["run_id"], "resume").json()["state"] == "queued"
    (following,) = claim(api, worker)["assignments"]
    assignment_of_next: dict[str, Any] = following
    return assignment_of_next


def two_running(api: Api, worker: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two runs of one job claimed by ``worker``: their assignments, in the order started."""
    job = api.create_job("train")
    first, second = (api.start_run(job["id"]) for _ in range(2))
    assignments = {a["run_id"]: a for a in claim(api, worker)["assignments"]}
    return assignments[first["id"]], assignments[second["id"]]


def stored_rows(api: Api) -> tuple[int, int]:
    with api.store.database.read() as connection:
        return (
            connection.execute(select(func.count()).select_from(checkpoints)).scalar_one(),
            connection.execute(select(func.count()).select_from(checkpoint_chunks)).scalar_one(),
        )


def test_a_save_is_restored_into_the_runs_next_attempt_and_shown_with_the_run(api: Api) -> None:
    worker = register_worker(api)
    training = api.start_run(api.create_job("train")["id"])
    (first,) = claim(api, worker)["assignments"]
    assert first["checkpoint"] is None  # a first attempt never restores one
    assert save(api, worker, first, SAVED).status_code == 204

    saved = info(api, training["id"]).json()
    digest = hashlib.sha256(SAVED).hexdigest()
    assert (saved["attempt"], saved["sha256"], saved["stored_bytes"]) == (1, digest, len(SAVED))
    assert run(api, training["id"])["checkpoint"]["sha256"] == digest

    second = suspended_and_resumed(api, worker, first)
    assert second["checkpoint"] == {"sha256": digest, "stored_bytes": len(SAVED), "attempt": 1}
    restored = fetch(api, worker, second)
    assert restored.status_code == 200
    assert (restored.content, restored.headers["x-herder-sha256"]) == (SAVED, digest)


def test_a_zombies_save_is_refused_and_the_run_keeps_what_its_current_attempt_saved(
    api: Api,
) -> None:
    worker = register_worker(api)
    api.start_run(api.create_job("train")["id"])
    (first,) = claim(api, worker)["assignments"]
    save(api, worker, first, b"step 1")
    second = suspended_and_resumed(api, worker, first)
    assert save(api, worker, second, b"step 2").status_code == 204

    late = save(api, worker, first, b"step 1, late")
    assert late.status_code == 409, late.text
    assert "no longer" in late.json()["detail"] or "may save no more" in late.json()["detail"]
    assert fetch(api, worker, second).content == b"step 2"
    assert fetch(api, worker, first).status_code == 404  # nor may it read any more


def test_a_save_past_checkpoint_mb_is_413_and_nothing_is_kept(api: Api) -> None:
    worker = register_worker(api)
    small = api.start_run(api.create_job("small", checkpoint_mb=1)["id"])
    (attempt,) = claim(api, worker)["assignments"]
    assert save(api, worker, attempt, b"kept").status_code == 204
    refused = save(api, worker, attempt, b"x" * (1024 * 1024 + 1))
    assert refused.status_code == 413, refused.text
    assert "checkpoint_mb" in refused.json()["detail"]
    assert info(api, small["id"]).json()["stored_bytes"] == len(b"kept")
    assert save(api, worker, attempt, b"").status_code == 422


def test_another_worker_and_another_tenant_find_nothing(api: Api) -> None:
    worker, stranger = register_worker(api, "holder"), register_worker(api, "stranger")
    training = api.start_run(api.create_job("train")["id"])
    (attempt,) = claim(api, worker)["assignments"]
    save(api, worker, attempt, SAVED)
    assert save(api, stranger, attempt, b"mine now").status_code == 404
    assert fetch(api, stranger, attempt).status_code == 404

    other = api.as_key(api.other_tenant_key("other", Role.ADMIN))
    path = f"/v1/runs/{training['id']}/checkpoint"
    for method, url in (("GET", path), ("GET", f"{path}/content"), ("DELETE", path)):
        assert api.http.request(method, url, headers=other).status_code == 404, (method, url)
    assert info(api, training["id"]).status_code == 200


def test_viewers_see_it_developers_download_it_operators_delete_it(api: Api) -> None:
    worker = register_worker(api)
    training = api.start_run(api.create_job("train")["id"])
    (attempt,) = claim(api, worker)["assignments"]
    save(api, worker, attempt, SAVED)
    keys = {role: api.as_key(api.store.access.create_api_key(api.tenant_id, role, "k")[1])
            for role in Role}  # fmt: skip
    path = f"/v1/runs/{training['id']}/checkpoint"
    assert api.http.get(path, headers=keys[Role.VIEWER]).status_code == 200
    for role in (Role.VIEWER, Role.OPERATOR):
        assert api.http.get(f"{path}/content", headers=keys[role]).status_code == 403, role
    download = api.http.get(f"{path}/content", headers=keys[Role.DEVELOPER])
    assert (download.status_code, download.content) == (200, SAVED)
    assert api.http.delete(path, headers=keys[Role.VIEWER]).status_code == 403
    assert api.http.delete(path, headers=keys[Role.OPERATOR]).status_code == 204
    assert api.http.get(path, headers=keys[Role.VIEWER]).status_code == 404
    assert stored_rows(api) == (0, 0)
    second = suspended_and_resumed(api, worker, attempt)
    assert second["checkpoint"] is None  # it starts afresh


def test_a_checkpoint_of_a_run_that_ended_is_gone(api: Api) -> None:
    worker = register_worker(api)
    training = api.start_run(api.create_job("train")["id"])
    (attempt,) = claim(api, worker)["assignments"]
    save(api, worker, attempt, SAVED)
    report(api, worker, completions=[completion(attempt)])
    assert info(api, training["id"]).status_code == 404  # at once, before any sweep
    assert run(api, training["id"])["checkpoint"] is None
    assert api.store.checkpoints.sweep() == 1
    assert stored_rows(api) == (0, 0)


def test_a_kept_checkpoint_outlives_its_run_for_its_days_then_goes(api: Api) -> None:
    worker = register_worker(api)
    training = api.start_run(api.create_job("train", checkpoint_keep_days=3)["id"])
    (attempt,) = claim(api, worker)["assignments"]
    save(api, worker, attempt, SAVED)
    report(api, worker, completions=[completion(attempt)])
    assert api.store.checkpoints.sweep() == 0
    kept = info(api, training["id"]).json()
    ended = run(api, training["id"])["finished_at"]
    assert kept["expires_at"] is not None
    assert kept["expires_at"] > ended
    with api.store.database.write() as connection:  # three days pass
        connection.execute(
            update(checkpoints).values(expires_at=api.store.clock.now() - timedelta(seconds=1))
        )
    assert info(api, training["id"]).status_code == 404
    assert api.store.checkpoints.sweep() == 1
    assert stored_rows(api) == (0, 0)


def test_content_is_stored_once_per_tenant_and_never_shared_across_tenants(api: Api) -> None:
    worker = register_worker(api)
    job = api.create_job("train")
    first, second = (api.start_run(job["id"]) for _ in range(2))
    assignments = claim(api, worker)["assignments"]
    for assignment in assignments:
        save(api, worker, assignment, SAVED)
    assert stored_rows(api) == (2, 1)  # two runs, one copy of the bytes
    api.http.delete(f"/v1/runs/{first['id']}/checkpoint", headers=api.admin)
    assert stored_rows(api) == (1, 1)  # the second still names them
    assert info(api, second["id"]).json()["sha256"] == hashlib.sha256(SAVED).hexdigest()


def test_a_job_asking_more_than_the_server_keeps_is_refused_naming_the_field(api: Api) -> None:
    response = api.http.post(
        "/v1/jobs",
        headers=api.admin,
        json={"name": "huge", "runtime": "shell", "command": "true", "checkpoint_mb": 4096},
    )
    assert response.status_code == 422, response.text
    assert "HERDER_MAX_CHECKPOINT_MB" in response.text
    assert "checkpoint_mb" in response.text
    job = api.create_job("fits", checkpoint_mb=1024)
    changed = api.http.patch(
        f"/v1/jobs/{job['id']}", headers=api.admin, json={"checkpoint_mb": 2048}
    )
    assert changed.status_code == 422, changed.text


@pytest.mark.parametrize("attempt", ["0", "x", "2147483648"])
def test_a_bad_attempt_number_is_a_clear_422(api: Api, attempt: str) -> None:
    worker = register_worker(api)
    api.start_run(api.create_job()["id"])
    (assignment,) = claim(api, worker)["assignments"]
    response = api.http.put(
        f"/v1/workers/{worker}/attempts/{assignment['attempt_id']}/checkpoint",
        params={"attempt": attempt},
        content=b"x",
        headers={**as_worker(worker), "Content-Type": "application/octet-stream"},
    )
    assert response.status_code == 422, response.text
    assert "attempt" in response.text


def test_why_an_attempts_end_saved_no_checkpoint_is_on_the_attempt(api: Api) -> None:
    worker = register_worker(api)
    training = api.start_run(api.create_job("train")["id"])
    (attempt,) = claim(api, worker)["assignments"]
    why = "the checkpoint directory holds 2097152 bytes, more than its checkpoint_mb (1 MiB)"
    report(api, worker, completions=[completion(attempt) | {"checkpoint_refused": why}])
    (ended,) = run(api, training["id"])["attempts"]
    assert ended["checkpoint_refused"] == why


# --- with a cold store (HERDER_COLD_STORE) -----------------------------------------------


def keep_checkpoints_in(api: Api, monkeypatch: pytest.MonkeyPatch, root: Path | None) -> None:
    """The server as started with ``HERDER_COLD_STORE`` at ``root`` (None: without one)."""
    blobs = DirectoryBlobStore(root) if root is not None else None
    repository = CheckpointRepository(api.store.database, api.store.clock, blobs)
    monkeypatch.setattr(api.store, "checkpoints", repository)


@pytest.fixture
def cold(api: Api, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    keep_checkpoints_in(api, monkeypatch, tmp_path / "cold")
    return tmp_path / "cold"


def cold_file(cold: Path, api: Api, content: bytes) -> Path:
    return cold / "checkpoints" / api.tenant_id / hashlib.sha256(content).hexdigest()


def unnamed_a_grace_ago(api: Api) -> None:
    """The grace an unnamed content in the cold store gets passes."""
    with api.store.database.write() as connection:
        connection.execute(
            update(checkpoint_contents)
            .where(checkpoint_contents.c.unreferenced_since.is_not(None))
            .values(unreferenced_since=api.store.clock.now() - timedelta(minutes=2))
        )


def test_with_a_cold_store_the_bytes_are_a_private_file_there_and_no_rows(
    api: Api, cold: Path
) -> None:
    worker = register_worker(api)
    training = api.start_run(api.create_job("train")["id"])
    (first,) = claim(api, worker)["assignments"]
    assert save(api, worker, first, SAVED).status_code == 204

    stored = cold_file(cold, api, SAVED)
    assert stored.read_bytes() == SAVED
    assert stored.stat().st_mode & 0o777 == 0o600
    assert stored_rows(api) == (1, 0)  # the checkpoint's row; no chunk of bytes
    path = f"/v1/runs/{training['id']}/checkpoint/content"
    assert api.http.get(path, headers=api.admin).content == SAVED
    second = suspended_and_resumed(api, worker, first)
    restored = fetch(api, worker, second)
    assert (restored.status_code, restored.content) == (200, SAVED)


def test_cold_content_no_checkpoint_names_goes_after_a_grace(api: Api, cold: Path) -> None:
    worker = register_worker(api)
    api.start_run(api.create_job("train")["id"])
    (attempt,) = claim(api, worker)["assignments"]
    save(api, worker, attempt, b"step 1")
    save(api, worker, attempt, b"step 2")  # step 1 is named no more

    assert api.store.checkpoints.purge() == 0  # within its grace: a download may be reading
    assert cold_file(cold, api, b"step 1").exists()
    unnamed_a_grace_ago(api)
    assert api.store.checkpoints.purge() == 1
    assert not cold_file(cold, api, b"step 1").exists()
    assert cold_file(cold, api, b"step 2").read_bytes() == b"step 2"
    assert fetch(api, worker, attempt).content == b"step 2"


def test_cold_content_named_again_within_its_grace_is_kept_and_stored_anew(
    api: Api, cold: Path
) -> None:
    worker = register_worker(api)
    one, two = two_running(api, worker)
    save(api, worker, one, SAVED)
    save(api, worker, one, b"moved on")  # SAVED is named by no checkpoint now
    cold_file(cold, api, SAVED).unlink()  # as a sweeper whose transaction then failed left it

    assert save(api, worker, two, SAVED).status_code == 204  # named again: stored anew
    unnamed_a_grace_ago(api)
    assert api.store.checkpoints.purge() == 0
    assert cold_file(cold, api, SAVED).read_bytes() == SAVED
    download = api.http.get(f"/v1/runs/{two['run_id']}/checkpoint/content", headers=api.admin)
    assert download.content == SAVED
    assert info(api, one["run_id"]).json()["sha256"] == hashlib.sha256(b"moved on").hexdigest()


def test_a_deleted_or_ended_runs_cold_checkpoint_goes_from_the_cold_store(
    api: Api, cold: Path
) -> None:
    worker = register_worker(api)
    deleted, ended = two_running(api, worker)
    save(api, worker, deleted, b"deleted")
    save(api, worker, ended, b"ended")
    api.http.delete(f"/v1/runs/{deleted['run_id']}/checkpoint", headers=api.admin)
    report(api, worker, completions=[completion(ended)])
    assert api.store.checkpoints.sweep() == 1

    unnamed_a_grace_ago(api)
    assert api.store.checkpoints.purge() == 2
    assert list((cold / "checkpoints" / api.tenant_id).iterdir()) == []
    with api.store.database.read() as connection:
        left = connection.execute(select(func.count()).select_from(checkpoint_contents))
        assert left.scalar_one() == 0


def test_checkpoints_kept_in_the_database_are_read_there_once_a_cold_store_is_set(
    api: Api, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    worker = register_worker(api)
    before, after = two_running(api, worker)
    save(api, worker, before, b"in the database")

    keep_checkpoints_in(api, monkeypatch, tmp_path / "cold")
    save(api, worker, after, b"in the cold store")
    assert stored_rows(api) == (2, 1)
    for run_id, content in (
        (before["run_id"], b"in the database"),
        (after["run_id"], b"in the cold store"),
    ):
        download = api.http.get(f"/v1/runs/{run_id}/checkpoint/content", headers=api.admin)
        assert download.content == content
    assert cold_file(tmp_path / "cold", api, b"in the cold store").exists()
    assert not cold_file(tmp_path / "cold", api, b"in the database").exists()


def test_a_server_started_without_the_cold_store_says_where_the_checkpoint_is(
    api: Api, cold: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = register_worker(api)
    training = api.start_run(api.create_job("train")["id"])
    (attempt,) = claim(api, worker)["assignments"]
    save(api, worker, attempt, SAVED)

    keep_checkpoints_in(api, monkeypatch, None)
    assert info(api, training["id"]).status_code == 200
    download = api.http.get(f"/v1/runs/{training['id']}/checkpoint/content", headers=api.admin)
    assert download.status_code == 503, download.text
    assert "HERDER_COLD_STORE" in download.json()["detail"]
    assert "retry-after" not in download.headers  # lasting until someone sets it: no retry
    assert save(api, worker, attempt, SAVED).status_code == 204  # saved again: in the database
    assert (
        api.http.get(f"/v1/runs/{training['id']}/checkpoint/content", headers=api.admin).content
        == SAVED
    )
