"""What a worker keeps on its host to run attempts, and each attempt's place there.

A root worker keeps its state under ``home`` in directories no job can reach or prepare
(``statedir.py``):

    /var/lib/herder/bin/herder-sandbox-<hash>   the launcher, built once per version and host
    <home>/worker-<uid base>/cache       artifacts by sha256 (the agent's ArtifactCache)
    /dev/shm/herder-<uid>-<digest>       workspaces of attempts at isolation none, and
                                         their checkpoint directories (<attempt>.checkpoint);
                                         <home>/worker-<uid base>/attempts where no /dev/shm
    <home>/worker-<uid base>/checkpoints checkpoints on their way to or from the server
    <home>/worker-<uid base>/root        where the launcher builds what all attempts see
    <home>/worker-<uid base>/net         network namespaces of network-on attempts
    /run/herder/uids                     which uid ranges this host's workers hold; a range's
                                         base is its worker's number on the host (cgroup,
                                         nftables table herder_w<base>, interface group)

``AttemptHost.attempt`` gives one attempt its uid, disk (or, at isolation none, a plain
workspace) and network, and takes them back when the attempt has ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from herder.domain.models import Assignment
from herder.worker import cgroupfs
from herder.worker.cgroup_pool import READY_CGROUPS
from herder.worker.cgroups import CgroupsUnavailable, cpu_accounts
from herder.worker.disk import (
    CHECKPOINT,
    MIB,
    AttemptDisk,
    close_disk,
    detach_leftover,
    open_disk,
)
from herder.worker.isolation import Isolation
from herder.worker.launch_server import LaunchServer
from herder.worker.launcher import sandbox_launcher
from herder.worker.limits import Enforcer
from herder.worker.network import (
    AttemptNetwork,
    NetworkUnavailable,
    OutboundNetworks,
    control_plane_addresses,
)
from herder.worker.sandbox import (
    SYSTEM_DIRECTORIES,
    Sandbox,
    limit_enforcer,
    skeleton_options,
    system_view,
)
from herder.worker.statedir import secure_directory
from herder.worker.uids import UidSweeper, kill_processes_of_uids, reserve_uid_pool
from herder.worker.workspace import (
    check_plain_name,
    memory_workspace_root,
    prepare_workspace,
    remove_workspace,
    workspace_root,
)

log = logging.getLogger("herder.worker")

CHECKPOINT_SUFFIX = ".checkpoint"  # at isolation none, beside the attempt's workspace
UID_LOCKS = Path("/run/herder/uids")  # host-wide: every root worker must see every other's
LAUNCHERS = Path("/var/lib/herder/bin")  # host-wide: built once, whatever a worker's home


@dataclass
class AttemptPlace:
    """Where one attempt runs: its working directory on this host and its checkpoint
    directory (both as the worker reaches them), and its sandbox (None at isolation none,
    where it runs as the worker's user in that directory, started by ``launcher``).

    ``contained``, set once it has ended, says nothing of it can be left running
    (``Outcome.contained``): its uid then goes back without a sweep."""

    workspace: Path
    checkpoint: Path
    uid: int | None
    sandbox: Sandbox | None
    launcher: LaunchServer | None = None
    contained: bool = False


class AttemptHost:
    def __init__(
        self,
        home: Path,
        isolation: Isolation,
        *,
        uid_base: int,
        uid_count: int,
        server_url: str,
        ready_cgroups: int = READY_CGROUPS,
        expose: Sequence[str] = (),
        block: Sequence[str] = (),
        allow_cidr: Sequence[str] = (),
    ) -> None:
        self.sandboxed = isolation is Isolation.SANDBOX
        if self.sandboxed and os.geteuid() != 0:
            raise SystemExit(
                "a worker sandboxes its attempts only when it runs as root; run it as root, "
                "or pass --isolation none if every job this fleet runs is trusted"
            )
        home = secure_directory(home)
        locks = secure_directory(UID_LOCKS) if self.sandboxed else secure_directory(home / "uids")
        self.uids, self._uid_range = reserve_uid_pool(uid_base, uid_count, locks)
        self.sweeper = UidSweeper(self.uids)
        self.state = secure_directory(home / f"worker-{self.uids.base}")  # the range is ours
        self._workspaces = workspace_root(self.state)
        self.checkpoints = secure_directory(self.state / "checkpoints")
        self._cpu_accounts: Path | None = None
        if self.sandboxed:
            binary = sandbox_launcher(secure_directory(LAUNCHERS, 0o755))
            view = system_view(SYSTEM_DIRECTORIES + tuple(expose))
            root = secure_directory(self.state / "root", 0o755)
            self._launcher = LaunchServer.sandboxing(binary, skeleton_options(root, view))
        else:  # the attempts die with us, and are charged all they ran where we can tell
            # named as its workspaces: none workers' uid ranges are unique per home only
            self._cpu_accounts = _cpu_accounts(f"{memory_workspace_root(self.state).name}-cpu")
            self._launcher = LaunchServer.plain(self._cpu_accounts)
        self._report_leftovers()
        self.enforcer: Enforcer | None = None  # isolation none: the worker's own limits
        if self.sandboxed:
            self.enforcer = limit_enforcer(f"worker-{self.uids.base}", ready=ready_cgroups)
        else:
            log.info("resource limits: none per attempt (isolation none); the worker's own hold")
        blocked = [*control_plane_addresses(server_url), *block]
        self._networks = self._outbound_networks(blocked, allow_cidr) if self.sandboxed else None

    def _outbound_networks(
        self, blocked: list[str], allowed: Sequence[str]
    ) -> OutboundNetworks | str:
        """Networks for ``network: true`` attempts, or why there are none: such attempts then
        fail with that reason rather than share the worker's network."""
        try:
            networks = OutboundNetworks(
                secure_directory(self.state / "net"), self.uids.base, blocked,
                allowed=allowed,
            )  # fmt: skip
        except (NetworkUnavailable, OSError) as error:
            log.error("jobs with network: true cannot run here: %s", error)
            return f"this worker cannot give jobs a network: {error}"
        log.info(
            "network: true jobs get outbound access; blocked: %s; private and special ranges "
            "denied but for: %s (docs/isolation.md, Network)",
            ", ".join(blocked) or "-", ", ".join(allowed) or "-",
        )  # fmt: skip
        return networks

    def _report_leftovers(self) -> None:
        """What a worker of this home and range that died left: its attempts' processes (only
        where they outlived it: an attempt dies with its worker's launcher) die, and their
        workspaces, never reused, go; said in one line."""
        killed = kill_processes_of_uids(self.uids.all_uids()) if self.sandboxed else 0
        workspaces = self._remove_leftovers()
        for archive in self.checkpoints.iterdir():  # a save or restore it was making
            archive.unlink()
        if killed or workspaces:
            log.warning("a previous worker on this home left %d attempt workspace(s), removed "
                        "(%s), and %d of their processes running, killed",
                        len(workspaces), ", ".join(workspaces) or "-", killed)  # fmt: skip

    def _remove_leftovers(self) -> list[str]:
        """Workspaces of a worker of this range that died (named for their attempts): never
        reused."""
        removed = []
        roots = {self._workspaces, self.state / "attempts"}  # the second: older versions'
        for path in (path for root in roots if root.is_dir() for path in root.iterdir()):
            if path.is_mount():  # an attempt's disk, as workers mounted them before
                detach_leftover(path)
            remove_workspace(path)
            removed.append(path.name)
        return removed

    @contextlib.asynccontextmanager
    async def attempt(self, assignment: Assignment) -> AsyncIterator[AttemptPlace]:
        """The attempt's place, ready; on leaving, whatever still runs under its uid dies
        before the uid is used again (unless the place says nothing can), its network and
        disk are gone."""
        check_plain_name(assignment.attempt_id)
        uid = self.uids.acquire() if self.sandboxed else None
        disk: AttemptDisk | None = None
        workspace: Path | None = None
        checkpoint: Path | None = None
        network: AttemptNetwork | None = None
        place: AttemptPlace | None = None
        try:
            if uid is None:
                places = await asyncio.to_thread(
                    _prepare_places, self._workspaces, assignment.attempt_id
                )
                workspace, checkpoint = places
                yield AttemptPlace(*places, None, None, self._launcher)
                return
            disk = open_disk(assignment.spec.resources.disk_mb * MIB, uid)  # no thread: quick
            if assignment.spec.network:
                network = await self._open_network(assignment.attempt_id)
            sandbox = self._sandbox(assignment, uid, disk, network)
            place = AttemptPlace(disk.work, disk.root / CHECKPOINT, uid, sandbox)
            yield place
        finally:
            if uid is not None:
                self.sweeper.finished(uid, contained=place is not None and place.contained)
            if network is not None and isinstance(self._networks, OutboundNetworks):
                await asyncio.to_thread(self._networks.close, network)
            if disk is not None:
                close_disk(disk)
            else:
                made = [place for place in (workspace, checkpoint) if place is not None]
                if made:  # one hop off the loop for both: the one-off path's cost
                    await asyncio.to_thread(_remove_places, made)

    async def _open_network(self, attempt_id: str) -> AttemptNetwork:
        if not isinstance(self._networks, OutboundNetworks):
            raise NetworkUnavailable(self._networks or "this worker gives jobs no network")
        return await asyncio.to_thread(self._networks.open, attempt_id)

    def _sandbox(
        self, assignment: Assignment, uid: int, disk: AttemptDisk, network: AttemptNetwork | None
    ) -> Sandbox:
        return Sandbox(
            self._launcher,
            uid,
            disk,
            net_namespace=network.namespace if network is not None else None,
            resolv_conf=network.resolv_conf if network is not None else None,
            gpu_indices=tuple(assignment.gpu_indices),
        )

    async def close(self) -> None:
        """Once every attempt has ended: sweep their uids, remove networks and cgroups."""
        try:
            await self.sweeper.sweep()
        finally:
            if isinstance(self._networks, OutboundNetworks):
                await asyncio.to_thread(self._networks.close_all)
            if self.enforcer is not None:
                await asyncio.to_thread(self.enforcer.close)
            self._launcher.close()
            if self._cpu_accounts is not None:
                await asyncio.to_thread(cgroupfs.remove, self._cpu_accounts)
            self._uid_range.release()
            with contextlib.suppress(OSError):  # empty now, unless an attempt's would not go
                self._workspaces.rmdir()


def _cpu_accounts(name: str) -> Path | None:
    """Where isolation none's keepers make their CPU accounts (``plain_launcher.py``), or
    None, said in the log: its attempts are then charged what their keepers reaped."""
    try:
        parent = cpu_accounts(name)
    except CgroupsUnavailable as error:
        log.info("CPU accounts: none (%s): an attempt is charged what its processes' parents "
                 "waited for (docs/isolation.md)", error)  # fmt: skip
        return None
    log.info("CPU accounts: a cgroup per keeper under %s", parent)
    return parent


def _prepare_places(root: Path, attempt_id: str) -> tuple[Path, Path]:
    """At isolation none: the attempt's workspace and, beside it, its checkpoint directory."""
    workspace = prepare_workspace(root, attempt_id)
    return workspace, prepare_workspace(root, attempt_id + CHECKPOINT_SUFFIX)


def _remove_places(places: list[Path]) -> None:
    for place in places:
        remove_workspace(place)
