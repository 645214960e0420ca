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
It is kept while the worker's state is; an image that is not used again stays until then.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import shutil
import stat
import tempfile
from collections.abc import Callable, Sequence
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
    Budget,
    apply_layer,
    remove_path,
)
from herder.worker.oci_archive import open_archive, open_layer, read_image
from herder.worker.oci_registry import Registry
from herder.worker.sandbox import IMAGE_MOUNT_POINTS, RESOLV_CONF

REGISTRY_TIMEOUT_SECONDS = 60.0

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
    ) -> None:
        self._blobs = directory / "blobs"
        self._roots = directory / "roots"
        for made in (directory, self._blobs, self._roots):
            made.mkdir(mode=0o700, exist_ok=True)
            for partial in made.glob(".*"):  # a build or download a worker died in
                remove_path(partial)
        self._artifacts = artifacts
        self._registries = registries
        self._max_bytes = max_bytes
        self._ready: dict[str, PreparedImage] = {}  # by the artifact or reference named
        self._locks: dict[str, asyncio.Lock] = {}

    async def prepare(self, spec: JobSpec) -> PreparedImage:
        """The root and config of the image ``spec`` names; ``ImageProblem`` (or an HTTP
        error) when it cannot be had: the attempt fails with that reason."""
        source = spec.image or spec.artifact
        if source is None:
            raise ImageProblem("runtime image needs an artifact or an image")
        ready = self._ready.get(source)
        if ready is not None and ready.root.is_dir():
            return ready
        async with self._locks.setdefault(source, asyncio.Lock()):
            if source not in self._ready:
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
        return PreparedImage(root, config)


def build_root(
    roots: Path, config_digest: str, config: ImageConfig, layers: Layers, budget: Budget
) -> Path:
    """The image's root under ``roots``: there already, or stacked from ``layers`` (each
    checked against its ``diff_id``) in a directory of its own, then renamed into place."""
    target = roots / _hex(config_digest)
    if target.is_dir():
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
