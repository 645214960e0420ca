"""Runtime image: the image a job names, as a root file system on this worker, built once.

    <state>/images/blobs/<hex>    layers fetched from a registry, checked by their digest
    <state>/images/roots/<key>    an image's layers stacked (``image_layers.py``), keyed by
                                  the sha256 of its config's digest and of each layer's, as
                                  read from the bytes it is stacked from (``root_key``)
    <state>/images/roots/.<key>.* one being built; renamed into place when whole, so two
                                  attempts of a new image never see half of one (the second
                                  to finish drops its copy and uses the first's)

A root is shared by every attempt, of any tenant, whose image is proven to be the same bytes:
the same config and the same layers, each layer's digest computed from what this attempt's
archive holds (or checked as a registry's blob is fetched). The config alone proves nothing:
configs of public images are public, and one with stand-in layers would otherwise be given
the root another tenant's private layers built. A layer that does not match its config's
``diff_id`` is refused as it is stacked.

Building costs the worker CPU for a tenant: it runs in a thread whose CPU time is charged to
the attempt that built it (``BuildCharge``: its usage, so its tenant's budgets), and an image
refused (past its bounds, a layer not its config's) is remembered by what fixes its content
(``Refusals``): the next run of it is refused at once, with the same reason, not built again.

The launcher binds a root read-only as the attempt's ``/`` (``sandbox.c``, ``--root-tree``).
Roots are bounded together (``HERDER_IMAGE_CACHE_MB``): past it, the least recently used
roots that no attempt holds are removed (a held one is bound into a running attempt, whose
files would vanish under it); ``<key>.used`` beside each says what it takes on disk (its
blocks and inodes, measured once it is built: a root of 199,000 empty directories holds no
file bytes but 782 MiB of blocks) and, by its mtime, when it was last used. A registry's
blobs are removed once their root is built.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import hashlib
import json
import logging
import os
import resource
import shutil
import stat
import tarfile
import tempfile
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, TypeVar

import httpx

from herder.domain.images import ImageConfig, ImageProblem, ImageReference, registry_for
from herder.domain.jobs import JobSpec
from herder.worker.archive import ArchiveRefused
from herder.worker.cache import ArtifactCache
from herder.worker.image_layers import (
    COPY_CHUNK_BYTES,
    DECOMPRESSION_ERRORS,
    INODE_BYTES,
    MAX_IMAGE_BYTES,
    MAX_IMAGE_ENTRIES,
    MIB,
    Budget,
    LayerRefused,
    apply_layer,
    remove_path,
)
from herder.worker.oci_archive import open_archive, open_layer, read_image
from herder.worker.oci_registry import Registry
from herder.worker.registry_auth import RegistryCredentials
from herder.worker.sandbox import IMAGE_MOUNT_POINTS, RESOLV_CONF

log = logging.getLogger(__name__)

REGISTRY_TIMEOUT_SECONDS = 60.0
CACHE_MB_VARIABLE = "HERDER_IMAGE_CACHE_MB"
DEFAULT_CACHE_BYTES = 10 * 1024 * MIB  # five of the largest images a worker stacks
USED_SUFFIX = ".used"
# What a refusal is remembered for: it is fixed by the image's content and this worker's
# bounds, which change only with a restart (that forgets); the time bounds a mistaken one.
REFUSALS_KEPT = 4096  # the newest, each a key and a reason: a few hundred KiB at most
REFUSAL_SECONDS = 3600.0
REFUSED = (ImageProblem, LayerRefused)

Layers = Sequence[Callable[[], contextlib.AbstractContextManager[IO[bytes]]]]
T = TypeVar("T")


@dataclass(frozen=True)
class PreparedImage:
    """An image ready to run: its root on this host and its config."""

    root: Path
    config: ImageConfig


@dataclass
class BuildCharge:
    """The CPU this worker spent building (or refusing) an image for one attempt: added to
    the attempt's usage, so its tenant's budgets see it. An attempt that finds the root
    built, or waits on another's build of it, is charged nothing."""

    user_seconds: float = 0.0
    system_seconds: float = 0.0


class Refusals:
    """Images this worker refused, by what fixes their content (an archive's sha256, a
    pinned reference, a root's key): refused again at once with the same reason, instead of
    being stacked again on every run. The newest ``most`` are kept, each for ``seconds``."""

    def __init__(
        self,
        most: int = REFUSALS_KEPT,
        seconds: float = REFUSAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._most, self._seconds, self._clock = most, seconds, clock
        self._reasons: OrderedDict[str, tuple[float, str]] = OrderedDict()
        self._lock = threading.Lock()  # checked and noted from build threads too

    def check(self, key: str) -> None:
        """``ImageProblem`` with the reason ``key`` was refused for, if it was lately."""
        with self._lock:
            noted = self._reasons.get(key)
            if noted is not None and self._clock() - noted[0] >= self._seconds:
                del self._reasons[key]
                noted = None
        if noted is not None:
            log.info("image %s refused again, as before: %s", key, noted[1])
            raise ImageProblem(noted[1])

    def note(self, reason: str, *keys: str) -> None:
        with self._lock:
            for key in keys:
                self._reasons[key] = (self._clock(), reason)
                self._reasons.move_to_end(key)
            while len(self._reasons) > self._most:
                self._reasons.popitem(last=False)


class ImageStore:
    def __init__(
        self,
        directory: Path,
        artifacts: ArtifactCache,
        registries: tuple[str, ...],
        max_bytes: int = MAX_IMAGE_BYTES,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        credentials: Mapping[str, RegistryCredentials] | None = None,
    ) -> None:
        self._blobs = directory / "blobs"
        self._roots = directory / "roots"
        for made in (directory, self._blobs, self._roots):
            made.mkdir(mode=0o700, exist_ok=True)
            for partial in made.glob(".*"):  # a build, download or eviction a worker died in
                remove_path(partial)
        whole = {used.root for used in _used_roots(self._roots)}
        for path in self._roots.iterdir():  # whole once its marker is written
            if path.is_dir() and path not in whole:
                remove_path(path)  # half made, or keyed by its config alone (an older worker)
            elif not path.is_dir() and _unmarked(path) not in whole:
                remove_path(path)
        self._artifacts = artifacts
        self._registries = registries
        self._max_bytes = max_bytes
        self._cache_bytes = cache_bytes
        self._credentials = credentials or {}  # by registry base URL
        self._ready: dict[str, PreparedImage] = {}  # by the artifact or reference named
        self._locks: dict[str, asyncio.Lock] = {}
        self._holders: Counter[Path] = Counter()  # roots bound into running attempts
        self._refusals = Refusals()

    @contextlib.asynccontextmanager
    async def holding(self, spec: JobSpec, charge: BuildCharge) -> AsyncIterator[PreparedImage]:
        """The image ``spec`` names, kept from eviction until the block ends (its attempt
        is over); then roots past the cache's bound are evicted. What building it cost is
        added to ``charge``."""
        image = await self.prepare(spec, charge)
        self._holders[image.root] += 1
        try:
            yield image
        finally:
            self._holders[image.root] -= 1
            if not self._holders[image.root]:
                del self._holders[image.root]
            for evicted in self._evict():
                await asyncio.to_thread(remove_path, evicted)

    def _evict(self) -> list[Path]:
        """Least recently used first, until the roots fit the bound; held ones stay. Chosen
        and moved aside on the event loop, between which no attempt can take one; the
        caller removes what is returned."""
        kept = sorted(_used_roots(self._roots), key=lambda used: used.last_used, reverse=True)
        total, evicted = sum(used.size for used in kept), []
        while total > self._cache_bytes and kept:
            oldest = kept.pop()
            if oldest.root in self._holders:
                continue
            self._ready = {name: r for name, r in self._ready.items() if r.root != oldest.root}
            oldest.marker.unlink(missing_ok=True)
            aside = oldest.root.with_name(f".{oldest.root.name}.evicted")
            oldest.root.rename(aside)
            evicted.append(aside)
            total -= oldest.size
            log.info("image root %s evicted (%d MiB)", oldest.root.name, oldest.size // MIB)
        return evicted

    async def prepare(self, spec: JobSpec, charge: BuildCharge) -> PreparedImage:
        """The root and config of the image ``spec`` names; ``ImageProblem`` (or an HTTP
        error) when it cannot be had: the attempt fails with that reason. Both sources fix
        their content (an artifact is named by its sha256, a reference pinned by digest)."""
        source = spec.image or spec.artifact
        if source is None:
            raise ImageProblem("runtime image needs an artifact or an image")
        ready = self._ready.get(source)
        if ready is not None and _mark_used(ready.root):
            return ready
        async with self._locks.setdefault(source, asyncio.Lock()):
            ready = self._ready.get(source)
            if ready is None or not _mark_used(ready.root):
                self._refusals.check(source)
                if spec.image is not None:
                    reference = ImageReference.parse(spec.image)
                    prepared = await self._from_registry(reference, charge)
                else:
                    archive = await self._artifacts.path(source)
                    build = functools.partial(self._from_archive, source, archive)
                    prepared = await asyncio.to_thread(_charged, charge, build)
                self._ready[source] = prepared
        return self._ready[source]

    def _budget(self) -> Budget:
        return Budget(self._max_bytes, MAX_IMAGE_ENTRIES)

    def _from_archive(self, source: str, path: Path) -> PreparedImage:
        """Its layers hashed as the archive holds them, which with its config name its root;
        a refusal is remembered by the archive and by that root's key."""
        key = None
        try:
            with open_archive(path) as archive:
                image = read_image(archive)
                digests = [_layer_digest(archive, name) for name in image.layers]
                key = root_key(image.config_digest, digests)
                self._refusals.check(key)
                layers = [
                    lambda name=name: contextlib.closing(open_layer(archive, name))
                    for name in image.layers
                ]
                root = build_root(self._roots, key, image.config, layers, self._budget())
        except REFUSED as refused:
            self._refusals.note(str(refused), source, *([key] if key is not None else []))
            raise
        return PreparedImage(root, image.config)

    async def _from_registry(self, reference: ImageReference, charge: BuildCharge) -> PreparedImage:
        """Its root's key from the manifest (pinned by the reference's digest) and the
        layers' digests it names, each checked as its blob is fetched: a root built from
        them is the one these name. Only the build's refusals are remembered: a registry's
        answer can be a passing fault."""
        base = registry_for(reference, self._registries)
        if base is None:
            raise ImageProblem(f"{reference} is not in a registry this worker may use "
                               "(its HERDER_IMAGE_REGISTRIES)")  # fmt: skip
        # a registry may send a blob's GET on to its storage: what comes back is checked
        client = httpx.AsyncClient(timeout=REGISTRY_TIMEOUT_SECONDS, follow_redirects=True)
        async with client:
            registry = Registry(base, client, self._credentials.get(base))
            manifest = await registry.manifest(reference)
            config_data = await registry.config(reference, manifest.config)
            config = ImageConfig.from_json(config_data)
            if len(config.diff_ids) != len(manifest.layers):
                raise ImageProblem("its config and its manifest list different layers")
            key = root_key(manifest.config, manifest.layers)
            self._refusals.check(key)
            if not (self._roots / key).is_dir():
                for digest in manifest.layers:
                    target = self._blobs / _hex(digest)
                    if not target.is_file():
                        await registry.blob_to(reference, digest, target, self._max_bytes)
        layers = [
            lambda digest=digest: (self._blobs / _hex(digest)).open("rb")
            for digest in manifest.layers
        ]
        build = functools.partial(build_root, self._roots, key, config, layers, self._budget())
        try:
            root = await asyncio.to_thread(_charged, charge, build)
        except REFUSED as refused:
            self._refusals.note(str(refused), str(reference), key)
            raise
        finally:  # the root holds them now (evicted, they are fetched again), or it failed
            for digest in manifest.layers:
                (self._blobs / _hex(digest)).unlink(missing_ok=True)
        return PreparedImage(root, config)


def root_key(config_digest: str, layer_digests: Sequence[str]) -> str:
    """The name of a root: the sha256 of its config's digest and its layers' digests (each
    computed from, or checked against, the bytes stacked), so that whoever finds a root by
    it holds those very layers."""
    return hashlib.sha256("\n".join([config_digest, *layer_digests]).encode()).hexdigest()


def _layer_digest(archive: tarfile.TarFile, name: str) -> str:
    """The sha256 of a layer as the archive holds it."""
    hashed = hashlib.sha256()
    layer = open_layer(archive, name)
    try:
        while chunk := layer.read(COPY_CHUNK_BYTES):
            hashed.update(chunk)
    except (tarfile.TarError, EOFError, ArchiveRefused, *DECOMPRESSION_ERRORS) as error:
        if isinstance(error, OSError) and error.errno is not None:
            raise  # the worker's disk, not the archive
        raise ImageProblem(f"its layer {name} cannot be read: {error}") from error
    return "sha256:" + hashed.hexdigest()


def _charged(charge: BuildCharge, work: Callable[[], T]) -> T:
    """``work``, run in this thread, its CPU time added to ``charge`` however it ends."""
    before = resource.getrusage(resource.RUSAGE_THREAD)
    try:
        return work()
    finally:
        after = resource.getrusage(resource.RUSAGE_THREAD)
        charge.user_seconds += after.ru_utime - before.ru_utime
        charge.system_seconds += after.ru_stime - before.ru_stime


def build_root(roots: Path, key: str, config: ImageConfig, layers: Layers, budget: Budget) -> Path:
    """The image's root under ``roots``, named ``key`` (``root_key``): there already, or
    stacked from ``layers`` (each checked against its ``diff_id``) in a directory of its
    own, measured, then renamed into place."""
    target = roots / key
    if _mark_used(target):
        return target
    log.info("image root %s: stacking %d layers", key, len(config.diff_ids))
    building = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=roots))
    try:
        for number, (diff_id, layer) in enumerate(zip(config.diff_ids, layers, strict=True), 1):
            with layer() as stream:
                found = apply_layer(building, stream, budget)
            if found != diff_id:
                raise ImageProblem(
                    f"layer {number} does not match its config's diff_id {diff_id} "
                    "(changed or corrupt)"
                )
        add_mount_points(building, config.working_dir)
        building.chmod(0o755)
        taken = disk_taken(building)
        try:
            building.rename(target)
        except OSError as error:  # another attempt built it first: use that one
            if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            shutil.rmtree(building)
        else:
            _marker(target).write_text(json.dumps({"bytes": taken.bytes, "inodes": taken.inodes}))
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return target


@dataclass(frozen=True)
class DiskTaken:
    """What a tree takes on its file system: the blocks its inodes hold and the inodes
    themselves (``INODE_BYTES`` each), in bytes; and how many inodes."""

    bytes: int
    inodes: int


def disk_taken(root: Path) -> DiskTaken:
    """Measured (``lstat``, never following a link); an inode hard-linked twice, once."""
    linked: set[int] = set()
    blocks = root.lstat().st_blocks
    inodes = 1
    pending = [root]
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    pending.append(Path(entry.path))
                elif info.st_nlink > 1:
                    if info.st_ino in linked:
                        continue
                    linked.add(info.st_ino)
                blocks += info.st_blocks
                inodes += 1
    return DiskTaken(blocks * 512 + inodes * INODE_BYTES, inodes)


def add_mount_points(root: Path, working_dir: str) -> None:
    """What the launcher mounts over must be an empty directory (a file for resolv.conf)
    whatever the image put there; the image's working directory is made if missing."""
    for point in IMAGE_MOUNT_POINTS:
        directory = _force_directory(root, PurePosixPath(point))
        for child in directory.iterdir():
            remove_path(child)
    etc = _force_directory(root, PurePosixPath(RESOLV_CONF).parent)
    resolv_conf = etc / PurePosixPath(RESOLV_CONF).name
    if not stat.S_ISREG(_mode_of(resolv_conf)):
        remove_path(resolv_conf)
        resolv_conf.touch(mode=0o644)
    if working_dir:
        _make_directory(root, PurePosixPath(working_dir))


def _force_directory(root: Path, path: PurePosixPath) -> Path:
    """``root``/``path`` a real directory: whatever else was on the way is replaced."""
    directory = root
    for part in path.parts[1:]:
        directory = directory / part
        if not stat.S_ISDIR(_mode_of(directory)):
            remove_path(directory)
            directory.mkdir(mode=0o755)
    return directory


def _make_directory(root: Path, path: PurePosixPath) -> None:
    """Missing directories made; a link on the way is left to resolve inside the attempt."""
    directory = root
    for part in path.parts[1:]:
        if part == "..":
            return
        directory = directory / part
        mode = _mode_of(directory)
        if mode == 0:
            directory.mkdir(mode=0o755)
        elif not stat.S_ISDIR(mode):
            return


def _mode_of(path: Path) -> int:
    try:
        return path.lstat().st_mode
    except FileNotFoundError:
        return 0


def _hex(digest: str) -> str:
    return digest.removeprefix("sha256:")


def image_cache_bytes(environment: Mapping[str, str]) -> int:
    """The bound on a worker's image roots from ``HERDER_IMAGE_CACHE_MB``; a value that is
    not a positive whole number stops the worker at its start, saying so."""
    given = environment.get(CACHE_MB_VARIABLE)
    if given is None:
        return DEFAULT_CACHE_BYTES
    if not given.isdigit() or int(given) < 1:
        raise ValueError(f"{CACHE_MB_VARIABLE} must be a whole number of MiB (≥ 1), not {given!r}")
    return int(given) * MIB


@dataclass(frozen=True)
class _UsedRoot:
    root: Path
    marker: Path
    size: int
    last_used: float


def _marker(root: Path) -> Path:
    return root.with_name(root.name + USED_SUFFIX)


def _unmarked(marker: Path) -> Path:
    return marker.with_name(marker.name.removesuffix(USED_SUFFIX))


def _mark_used(root: Path) -> bool:
    """Whether ``root`` is whole and there (its marker is written last, removed first);
    if so its use is noted, for eviction's order."""
    try:
        os.utime(_marker(root))
    except FileNotFoundError:
        return False
    return root.is_dir()


def _used_roots(roots: Path) -> list[_UsedRoot]:
    """The whole roots: each a directory with its marker, which says what it takes."""
    found = []
    for marker in roots.glob(f"*{USED_SUFFIX}"):
        try:
            size, last_used = json.loads(marker.read_text())["bytes"], marker.stat().st_mtime
        except (OSError, ValueError, TypeError, LookupError):
            continue  # an older worker's, which counted file bytes only
        root = _unmarked(marker)
        if isinstance(size, int) and root.is_dir():
            found.append(_UsedRoot(root, marker, size, last_used))
    return found
