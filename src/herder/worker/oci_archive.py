"""An image archive, as ``docker save`` writes it (``manifest.json``, and in newer Dockers an
OCI layout beside it) or ``skopeo copy … oci-archive:`` (``oci-layout``, ``index.json``,
``blobs/sha256/…``), plain or gzipped: its config and where each layer lies in it.

Every blob named by a digest is checked against it as it is read; the layers' uncompressed
digests are checked against the config's ``diff_ids`` as they are stacked (``images.py``).
"""

from __future__ import annotations

import contextlib
import json
import re
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from herder.domain.images import MAX_CONFIG_BYTES, ImageConfig, ImageProblem, json_object
from herder.worker.archive import DECOMPRESSORS, ArchiveRefused, BoundedStream
from herder.worker.image_layers import DECOMPRESSION_ERRORS, MAX_IMAGE_BYTES
from herder.worker.oci import (
    chosen_manifest,
    digest_of,
    is_index,
    manifest_of,
    verified,
)

MAX_MEMBERS = 10_000  # an archive of at most 10 MB: more would be all headers
MAX_NESTED_INDEXES = 4
_NAMED_BY_DIGEST = re.compile(r"(?:^|/)(?:blobs/sha256/)?([0-9a-f]{64})(?:\.json)?$")


@dataclass(frozen=True)
class ArchivedImage:
    """An image in an archive: its config (checked) and its layers' member names."""

    config: ImageConfig
    config_digest: str
    layers: tuple[str, ...]


def read_image(archive: tarfile.TarFile) -> ArchivedImage:
    """The image ``archive`` holds (the first, where ``docker save`` saved several)."""
    members = _members(archive)
    if "index.json" in members:
        return _oci_layout(archive, members)
    if "manifest.json" in members:
        return _docker_save(archive, members)
    raise ImageProblem(
        "not an image archive: it has neither index.json (OCI) nor manifest.json (docker save)"
    )


@contextlib.contextmanager
def open_archive(path: Path) -> Iterator[tarfile.TarFile]:
    """The archive (plain or compressed) read through ``archive.py``'s ``BoundedStream``: no
    header is read whole past its bound, and no more than an image may be."""
    with path.open("rb") as raw:
        head = raw.read(8)
        raw.seek(0)
        opener = next((opener for magic, opener in DECOMPRESSORS if head.startswith(magic)), None)
        stream = opener(raw) if opener is not None else raw
        try:
            bounded = BoundedStream(stream, MAX_IMAGE_BYTES)
            archive = tarfile.open(fileobj=bounded, mode="r:")  # noqa: SIM115  closed below
        except (tarfile.TarError, EOFError, ArchiveRefused, *DECOMPRESSION_ERRORS) as error:
            raise ImageProblem(f"not an image archive (.tar or .tar.gz): {error}") from error
        with archive:
            yield archive


def open_layer(archive: tarfile.TarFile, name: str) -> IO[bytes]:
    try:
        layer = archive.extractfile(name)
    except (KeyError, tarfile.TarError) as error:
        raise ImageProblem(f"its layer {name} is not in the archive") from error
    if layer is None:
        raise ImageProblem(f"its layer {name} is not a file")
    return layer


def _members(archive: tarfile.TarFile) -> dict[str, tarfile.TarInfo]:
    members: dict[str, tarfile.TarInfo] = {}
    try:
        for count, member in enumerate(archive, start=1):
            if count > MAX_MEMBERS:
                raise ImageProblem(f"the archive has more than {MAX_MEMBERS} members")
            members[member.name.removeprefix("./")] = member
    except (tarfile.TarError, EOFError, ArchiveRefused, *DECOMPRESSION_ERRORS) as error:
        raise ImageProblem(f"not a valid image archive: {error}") from error
    return members


def _read(archive: tarfile.TarFile, members: dict[str, tarfile.TarInfo], name: str) -> bytes:
    member = members.get(name)
    if member is None:
        raise ImageProblem(f"the archive lacks {name}")
    if member.size > MAX_CONFIG_BYTES:
        raise ImageProblem(f"{name} is larger than {MAX_CONFIG_BYTES} bytes")
    data = archive.extractfile(member)
    if data is None:
        raise ImageProblem(f"{name} in the archive is not a file")
    return data.read(MAX_CONFIG_BYTES + 1)


def _blob(digest: str) -> str:
    return "blobs/" + digest.replace(":", "/", 1)


def _oci_layout(archive: tarfile.TarFile, members: dict[str, tarfile.TarInfo]) -> ArchivedImage:
    parsed = json_object(_read(archive, members, "index.json"), "index.json")
    for _ in range(MAX_NESTED_INDEXES):
        if not is_index(parsed):
            break
        digest = chosen_manifest(parsed)
        data = verified(_read(archive, members, _blob(digest)), digest, f"manifest {digest}")
        parsed = json_object(data, f"manifest {digest}")
    else:
        raise ImageProblem(f"its indexes nest more than {MAX_NESTED_INDEXES} deep")
    manifest = manifest_of(parsed)
    config = verified(
        _read(archive, members, _blob(manifest.config)), manifest.config, "its config"
    )
    layers = tuple(_blob(digest) for digest in manifest.layers)
    return _image(config, manifest.config, layers, members)


def _docker_save(archive: tarfile.TarFile, members: dict[str, tarfile.TarInfo]) -> ArchivedImage:
    try:
        saved = json.loads(_read(archive, members, "manifest.json"))
        first = saved[0]
        config_name, layer_names = first["Config"], first["Layers"]
    except (ValueError, LookupError, TypeError) as error:
        raise ImageProblem(f"its manifest.json is not docker save's: {error}") from error
    if not isinstance(config_name, str) or not isinstance(layer_names, list):
        raise ImageProblem("its manifest.json names no config or no layers")
    if not all(isinstance(name, str) for name in layer_names):
        raise ImageProblem("its manifest.json names a layer that is not a path")
    config = _read(archive, members, config_name.removeprefix("./"))
    digest = digest_of(config)
    named = _NAMED_BY_DIGEST.search(config_name)
    if named is not None:
        verified(config, f"sha256:{named[1]}", "its config")
    layers = tuple(name.removeprefix("./") for name in layer_names)
    return _image(config, digest, layers, members)


def _image(
    config: bytes, digest: str, layers: tuple[str, ...], members: dict[str, tarfile.TarInfo]
) -> ArchivedImage:
    parsed = ImageConfig.from_json(config)
    if len(parsed.diff_ids) != len(layers):
        raise ImageProblem(
            f"its config lists {len(parsed.diff_ids)} layers, its manifest {len(layers)}"
        )
    for name in layers:
        if name not in members:
            raise ImageProblem(f"its layer {name} is not in the archive")
    return ArchivedImage(parsed, digest, layers)
