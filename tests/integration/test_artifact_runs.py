"""Uploaded programs run end to end — the real API served by uvicorn, a real worker agent at
isolation none — fetched from the blob store, or from the database for one uploaded before it;
and bytes that are not what their sha256 names, as the server sends them or as the worker's
cache keeps them, are refused and never run. On both stores."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from herder.app.artifacts import move_to_blob_store
from herder.domain.artifacts import artifact_key
from herder.store.cold.blobs import DirectoryBlobStore
from herder.store.store import Store
from herder.worker.agent import Agent
from tests.integration.test_artifact_moves import keep_in_database
from tests.integration.test_worker_stream_agent import Served, run_agent, run_state, served, until

ENDED = {"succeeded", "failed", "dead"}


def program(marker: Path, text: str) -> bytes:
    """A python program that leaves ``marker`` behind and prints ``text``."""
    return f"open({str(marker)!r}, 'a').write('ran\\n')\nprint({text!r})\n".encode()


def upload(server: Served, data: bytes) -> str:
    answer = httpx.post(
        f"{server.url}/v1/artifacts", headers=server.admin, files={"file": ("main.py", data)}
    )
    assert answer.status_code == 201, answer.text
    sha256: str = answer.json()["id"]
    return sha256


def job_of(server: Served, sha256: str) -> str:
    job = {"name": f"py-{sha256[:8]}", "runtime": "python", "artifact": sha256}
    created = httpx.post(f"{server.url}/v1/jobs", headers=server.admin, json=job)
    assert created.status_code == 201, created.text
    job_id: str = created.json()["id"]
    return job_id


def start(server: Served, job_id: str) -> str:
    run = httpx.post(f"{server.url}/v1/jobs/{job_id}/runs", headers=server.admin, json={})
    assert run.status_code == 201, run.text
    run_id: str = run.json()["id"]
    return run_id


async def ended(server: Served, store: Store, job_id: str) -> dict[str, Any]:
    """Start a run of the job and wait for its end: the run, with its attempts."""
    run_id = start(server, job_id)
    await until(lambda: run_state(server, run_id) in ENDED, store)
    run: dict[str, Any] = httpx.get(f"{server.url}/v1/runs/{run_id}", headers=server.admin).json()
    return run


def printed(server: Served, run: dict[str, Any]) -> str:
    logs = httpx.get(f"{server.url}/v1/runs/{run['id']}/logs", headers=server.admin).json()
    return "".join(chunk["text"] for chunk in logs["chunks"])


@contextmanager
def serving_program(
    store: Store, tmp_path: Path, blob_store: DirectoryBlobStore, text: str
) -> Iterator[tuple[Served, str, Path]]:
    """The API served, with a program uploaded that prints ``text``: its sha256 and where
    the server keeps it."""
    with served(store, tmp_path) as server:
        sha256 = upload(server, program(tmp_path / "ran", text))
        yield server, sha256, blob_store.root / artifact_key(store_tenant(store), sha256)


def test_an_uploaded_program_runs_end_to_end(
    store: Store, tmp_path: Path, artifact_blobs: DirectoryBlobStore
) -> None:
    text = "hello from the blob store"
    with serving_program(store, tmp_path, artifact_blobs, text) as (server, sha256, stored):
        assert stored.is_file()
        job_id = job_of(server, sha256)

        async def scenario(agent: Agent) -> None:
            run = await ended(server, store, job_id)
            assert run["state"] == "succeeded", run
            assert printed(server, run) == f"{text}\n"

        run_agent(server, tmp_path, scenario)
    assert (tmp_path / "ran").read_text() == "ran\n"


def test_a_program_in_the_database_runs_before_and_after_the_move(
    store: Store, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    data = program(marker, "uploaded long ago")
    with served(store, tmp_path) as server:
        sha256 = keep_in_database(store.database, store_tenant(store), data)
        job_id = job_of(server, sha256)

        async def before(agent: Agent) -> None:
            run = await ended(server, store, job_id)
            assert run["state"] == "succeeded", run

        run_agent(server, tmp_path / "before", before)
        assert move_to_blob_store(store).moved == 1

        async def after(agent: Agent) -> None:  # a new worker: it fetches the moved program
            run = await ended(server, store, job_id)
            assert run["state"] == "succeeded", run
            assert printed(server, run) == "uploaded long ago\n"

        run_agent(server, tmp_path / "after", after)
    assert marker.read_text() == "ran\nran\n"


def test_bytes_that_are_not_the_programs_sha256_are_never_run(
    store: Store, tmp_path: Path, artifact_blobs: DirectoryBlobStore
) -> None:
    marker = tmp_path / "ran"
    with serving_program(store, tmp_path, artifact_blobs, "the real one") as found:
        server, sha256, stored = found
        real = stored.read_bytes()
        stored.write_bytes(program(marker, "swapped in the blob store"))
        job_id = job_of(server, sha256)

        async def scenario(agent: Agent) -> None:
            refused = await ended(server, store, job_id)
            assert refused["state"] == "failed"
            assert "arrived corrupted (sha256 mismatch): not run" in reason_of(refused)
            stored.write_bytes(real)
            run = await ended(server, store, job_id)
            assert run["state"] == "succeeded", run
            (cached,) = tmp_path.glob(f"worker/**/cache/{sha256}")
            cached.chmod(0o600)
            cached.write_bytes(program(marker, "swapped in the worker's cache"))
            refused = await ended(server, store, job_id)
            assert refused["state"] == "failed"
            assert "is not what its sha256 names" in reason_of(refused)
            run = await ended(server, store, job_id)  # fetched again
            assert run["state"] == "succeeded", run
            assert printed(server, run) == "the real one\n"
            assert hashlib.sha256(cached.read_bytes()).hexdigest() == sha256

        run_agent(server, tmp_path, scenario)
    assert marker.read_text() == "ran\nran\n"  # the two runs of the real program only


def reason_of(run: dict[str, Any]) -> str:
    (attempt,) = run["attempts"]
    reason: str = attempt["reason"]
    return reason


def store_tenant(store: Store) -> str:
    """The one tenant ``served`` made (the default, whose admin key it holds)."""
    (tenant,) = store.access.list_tenants().items
    return tenant.id
