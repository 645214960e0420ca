"""Is the file given to ``job create --file`` an image archive? Then it runs as runtime
``image``, its layers as the root, not as a program that could never run (issue 41, item 10).

Told by its members' names, read as the worker reads an archive (plain or compressed, headers
bounded, nothing extracted, at most ``MAX_MEMBERS`` of them): ``docker save``'s
``manifest.json`` beside the layers it names (``…/layer.tar``, ``blobs/sha256/…``) or its
``repositories``, or an OCI layout's ``oci-layout`` and ``index.json``. A ``manifest.json``
alone is not enough: a browser extension's archive has one too. The image's config is then
read as the worker reads it, for what its entrypoint will do with the job's command.
"""

from __future__ import annotations

import tarfile
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from herder.domain.images import ImageProblem
from herder.domain.jobs import MAX_ARTIFACT_BYTES

DOCKER_SAVE = "docker save"
OCI_LAYOUT = "OCI layout"


@dataclass(frozen=True)
class ImageArchive:
    """An image archive: its layout, and its image's entrypoint (None: its config could not
    be read here, e.g. an index without this machine's platform; the worker reads it again)."""

    layout: str
    entrypoint: tuple[str, ...] | None


def image_layout(names: Collection[str]) -> str | None:
    """The image layout an archive with these member names has, or None."""
    if "oci-layout" in names and "index.json" in names:
        return OCI_LAYOUT
    if "manifest.json" in names and (
        "repositories" in names
        or any(name.endswith("/layer.tar") or name.startswith("blobs/sha256/") for name in names)
    ):
        return DOCKER_SAVE
    return None


def image_archive(path: Path) -> ImageArchive | None:
    """``path`` as an image archive, or None when it is none (a program, another archive)
    or too large to be uploaded at all."""
    if path.stat().st_size > MAX_ARTIFACT_BYTES:
        return None  # its upload is refused, saying so; no need to read it first
    # the worker's readers (and the decompressors they load) only for a file to look into
    from herder.worker.archive import ArchiveRefused
    from herder.worker.image_layers import DECOMPRESSION_ERRORS
    from herder.worker.oci_archive import MAX_MEMBERS, open_archive, read_image

    try:
        with open_archive(path) as archive:
            names = set()
            for count, member in enumerate(archive, start=1):
                if count > MAX_MEMBERS:
                    break
                names.add(member.name.removeprefix("./"))
            layout = image_layout(names)
            if layout is None:
                return None
            try:
                entrypoint: tuple[str, ...] | None = read_image(archive).config.entrypoint
            except ImageProblem:
                entrypoint = None
            return ImageArchive(layout, entrypoint)
    except (ImageProblem, tarfile.TarError, ArchiveRefused, *DECOMPRESSION_ERRORS):
        return None
