"""A hostile job against its own checkpoint saves, on real workers at both isolation levels
(issue 40, item 2): it asks for a save, then swaps a file the packer has listed for a fifo.
The save is refused and said so in the attempt's log; the run ends on its own, as the job
did (exit 0: succeeded); no packer is left, and neither is the attempt's disk (sandboxed) or
workspace (isolation none). And (item 7) a save past its tenant's max_checkpoint_mb."""

from __future__ import annotations

import contextlib
import uuid
from pathlib import Path

import pytest

from herder.client.errors import ApiError
from tests.integration.test_checkpoints import SWAPS_A_FILE_FOR_A_FIFO
from tests.system.conftest import Cluster, wait_until

pytestmark = pytest.mark.system

PACKER = "herder.worker.checkpoint_archive"


def packers_of(home: Path) -> list[int]:
    """The packers the workers of ``home`` started (they inherit its ``HERDER_HOME``), alive
    or orphaned."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if PACKER.encode() not in (entry / "cmdline").read_bytes():
                continue
            if f"HERDER_HOME={home}".encode() in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
    return found


def holders_of(marker: str) -> list[int]:
    """Processes that still reach a sandboxed attempt's disk, on which the job left
    ``work/<marker>``: as their root (a packer shut in there), or through a descriptor (the
    worker's, until the attempt's place is taken back). None: the disk is gone."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            ways = [entry / "root", *(entry / "fd").iterdir()]
            if any((way / "work" / marker).exists() for way in ways):
                found.append(int(entry.name))
    return found


@pytest.mark.timeout(240)  # above the sum of its waits: a loaded box may need them all
def test_a_fifo_swapped_in_mid_save_neither_hangs_the_run_nor_leaves_anything(
    isolated_cluster: Cluster,
) -> None:
    home = isolated_cluster.home
    marker = f"marker-{uuid.uuid4().hex}"
    command = f"touch {marker}; pwd; {SWAPS_A_FILE_FOR_A_FIFO}"
    with isolated_cluster.client() as client:
        job = client.create_job(
            f"fifo-{uuid.uuid4().hex[:8]}", {"runtime": "shell", "command": command}
        )
        run = client.wait(client.start_run(job.id).id, timeout=90)
        output = "".join(chunk.text for chunk in client.logs(run.id).chunks)
        assert run.state == "succeeded", (run.reason, output)
        assert "herder: checkpoint not saved: 'z' changed while it was packed" in output
    assert packers_of(home) == []  # the run ended after its last save
    workspace = Path(output.splitlines()[0])
    if workspace.is_absolute() and workspace != Path("/workspace"):  # isolation none
        wait_until(lambda: not workspace.exists(), 30, f"{workspace} removed")
        assert not Path(f"{workspace}.checkpoint").exists()
    else:
        wait_until(lambda: holders_of(marker) == [], 30, "the attempt's disk let go of")
    isolated_cluster.stop_all()
    assert packers_of(home) == []  # none outlives its worker either


def test_a_save_past_the_tenants_max_checkpoint_mb_is_refused_and_recorded_on_the_attempt(
    isolated_cluster: Cluster,
) -> None:
    """Issue 40, item 7, on a real worker: the server's 409 becomes the attempt's
    ``checkpoint_refused``, and the run keeps no checkpoint past its tenant's bound."""
    command = 'head -c 2097152 /dev/urandom > "$HERDER_CHECKPOINT_DIR/weights"'
    with isolated_cluster.client() as client:
        [tenant] = [tenant for tenant in client.list_tenants().items if tenant.is_system]
        client.update_tenant(tenant.id, quotas={"max_checkpoint_mb": 1})
        spec = {"runtime": "shell", "command": command, "checkpoint_keep_days": 1}
        job = client.create_job(f"weights-{uuid.uuid4().hex[:8]}", spec)
        run = client.wait(client.start_run(job.id).id, timeout=60)
        assert run.state == "succeeded", run.reason
        why = run.attempts[-1].checkpoint_refused or ""
        assert why.startswith("the server refused it: the checkpoint"), why
        assert "would take the tenant past its max_checkpoint_mb (1 MiB" in why
        with pytest.raises(ApiError) as none_kept:
            client.get_checkpoint(run.id)
        assert none_kept.value.status == 404
