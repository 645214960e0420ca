"""Runtime image: the image a job names, as a root file system on this worker, built once.

    <state>/images/blobs/<hex>    layers fetched from a registry, checked by their digest
    <state>/images/roots/<hex>    an image's layers stacked (``image_layers.py``), keyed by
                                  the sha256 of its config, which names every layer by its
                                  uncompressed digest: the same image from an archive or a
                                  registry is one root
    <state>/images/roots/.<hex>.* one being built; renamed into place when whole, so two
                                  attempts of a new image never see half of one (the second
                                  to finish drops its copy and uses the first's)

The launcher binds a root read-only as the attempt's ``/`` (``sandbox.c``, ``--root-tree``).
Roots are bounded together (``HERDER_IMAGE_CACHE_MB``): past it, the least recently used
roots that no attempt holds are removed (a held one is bound into a running attempt, whose
files would vanish under it); ``<hex>.used`` beside each says its size and, by its mtime,
when it was last used. A registry's blobs are removed once their root is built.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import shutil
import stat
import tempfile
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

import httpx

from herder.domain.images import ImageConfig, ImageProblem, ImageReference, registry_for
from herder.domain.jobs import JobSpec
from herder.worker.cache import ArtifactCache
from herder.worker.image_layers import (
    MAX_IMAGE_BYTES,
    MAX_IMAGE_ENTRIES,
    MIB,
    Budget,
    apply_layer,
    remove_path,
)
from herder.worker.oci_archive import open_archive, open_layer, read_image
from herder.worker.oci_registry import Registry
from herder.worker.sandbox import IMAGE_MOUNT_POINTS, RESOLV_CONF

log = logging.getLogger(__name__)

REGISTRY_TIMEOUT_SECONDS = 60.0
CACHE_MB_VARIABLE = "HERDER_IMAGE_CACHE_MB"
DEFAULT_CACHE_BYTES = 10 * 1024 * MIB  # five of the largest images a worker stacks
USED_SUFFIX = ".used"

Layers = Sequence[Callable[[], contextlib.AbstractContextManager[IO[bytes]]]]


@dataclass(frozen=True)
class PreparedImage:
    """An image ready to run: its root on this host and its config."""

    root: Path
    config: ImageConfig


class ImageStore:
    def __init__(
        self,
        directory: Path,
        artifacts: ArtifactCache,
        registries: tuple[str, ...],
        max_bytes: int = MAX_IMAGE_BYTES,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        self._blobs = directory / "blobs"
        self._roots = directory / "roots"
        for made in (directory, self._blobs, self._roots):
            made.mkdir(mode=0o700, exist_ok=True)
            for partial in made.glob(".*"):  # a build, download or eviction a worker died in
                remove_path(partial)
        for root in self._roots.iterdir():  # whole once its marker is written
            if root.is_dir() and not _marker(root).exists():
                remove_path(root)
        self._artifacts = artifacts
        self._registries = registries
        self._max_bytes = max_bytes
        self._cache_bytes = cache_bytes
        self._ready: dict[str, PreparedImage] = {}  # by the artifact or reference named
        self._locks: dict[str, asyncio.Lock] = {}
        self._holders: Counter[Path] = Counter()  # roots bound into running attempts

    @contextlib.asynccontextmanager
    async def holding(self, spec: JobSpec) -> AsyncIterator[PreparedImage]:
        """The image ``spec`` names, kept from eviction until the block ends (its attempt
        is over); then roots past the cache's bound are evicted."""
        image = await self.prepare(spec)
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

    async def prepare(self, spec: JobSpec) -> PreparedImage:
        """The root and config of the image ``spec`` names; ``ImageProblem`` (or an HTTP
        error) when it cannot be had: the attempt fails with that reason."""
        source = spec.image or spec.artifact
        if source is None:
            raise ImageProblem("runtime image needs an artifact or an image")
        ready = self._ready.get(source)
        if ready is not None and _mark_used(ready.root):
            return ready
        async with self._locks.setdefault(source, asyncio.Lock()):
            ready = self._ready.get(source)
            if ready is None or not _mark_used(ready.root):
                if spec.image is not None:
                    prepared = await self._from_registry(ImageReference.parse(spec.image))
                else:
                    archive = await self._artifacts.path(source)
                    prepared = await asyncio.to_thread(self._from_archive, archive)
                self._ready[source] = prepared
        return self._ready[source]

    def _budget(self) -> Budget:
        return Budget(self._max_bytes, MAX_IMAGE_ENTRIES)

    def _from_archive(self, path: Path) -> PreparedImage:
        with open_archive(path) as archive:
            image = read_image(archive)
            layers = [
                lambda name=name: contextlib.closing(open_layer(archive, name))
                for name in image.layers
            ]
            root = build_root(self._roots, image.config_digest, image.config, layers,
                              self._budget())  # fmt: skip
        return PreparedImage(root, image.config)

    async def _from_registry(self, reference: ImageReference) -> PreparedImage:
        base = registry_for(reference, self._registries)
        if base is None:
            raise ImageProblem(f"{reference} is not in a registry this worker may use "
                               "(its HERDER_IMAGE_REGISTRIES)")  # fmt: skip
        # a registry may send a blob's GET on to its storage: what comes back is checked
        client = httpx.AsyncClient(timeout=REGISTRY_TIMEOUT_SECONDS, follow_redirects=True)
        async with client:
            registry = Registry(base, client)
            manifest = await registry.manifest(reference)
            config_data = await registry.config(reference, manifest.config)
            config = ImageConfig.from_json(config_data)
            if len(config.diff_ids) != len(manifest.layers):
                raise ImageProblem("its config and its manifest list different layers")
            if not (self._roots / _hex(manifest.config)).is_dir():
                for digest in manifest.layers:
                    target = self._blobs / _hex(digest)
                    if not target.is_file():
                        await registry.blob_to(reference, digest, target, self._max_bytes)
        layers = [
            lambda digest=digest: (self._blobs / _hex(digest)).open("rb")
            for digest in manifest.layers
        ]
        root = await asyncio.to_thread(
            build_root, self._roots, manifest.config, config, layers, self._budget()
        )
        for digest in manifest.layers:  # the root holds them now; evicted, it is fetched again
            (self._blobs / _hex(digest)).unlink(missing_ok=True)
        return PreparedImage(root, config)


def build_root(
    roots: Path, config_digest: str, config: ImageConfig, layers: Layers, budget: Budget
) -> Path:
    """The image's root under ``roots``: there already, or stacked from ``layers`` (each
    checked against its ``diff_id``) in a directory of its own, then renamed into place."""
    target = roots / _hex(config_digest)
    if _mark_used(target):
        return target
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
        try:
            building.rename(target)
        except OSError as error:  # another attempt built it first: use that one
            if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            shutil.rmtree(building)
        else:
            _marker(target).write_text(str(budget.used_bytes))
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return target


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


def _mark_used(root: Path) -> bool:
    """Whether ``root`` is whole and there (its marker is written last, removed first);
    if so its use is noted, for eviction's order."""
    try:
        os.utime(_marker(root))
    except FileNotFoundError:
        return False
    return root.is_dir()


def _used_roots(roots: Path) -> list[_UsedRoot]:
    found = []
    for marker in roots.glob(f"*{USED_SUFFIX}"):
        try:
            size, last_used = int(marker.read_text()), marker.stat().st_mtime
        except (OSError, ValueError):
            continue
        found.append(_UsedRoot(marker.with_name(marker.name[: -len(USED_SUFFIX)]), marker,
                               size, last_used))  # fmt: skip
    return found
