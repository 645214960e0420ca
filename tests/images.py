"""OCI images made by the tests themselves, from the host's ``busybox-static`` (Debian's
static busybox, installed by ``make``): nothing is downloaded from a registry.

The busybox image has two layers. The first holds ``/bin/busybox`` and a symbolic link per
applet, ``/etc/greeting`` ("from the base layer"), ``/etc/removed`` and ``/opt/old/file``; the
second replaces ``/etc/greeting`` ("from the top layer") and whites out ``/etc/removed`` and
the directory ``/opt/old``. Its config: Entrypoint ``/bin/sh -c``, Cmd a script that prints
its greeting, working directory and ``$GREETING``, Env PATH and GREETING, WorkingDir ``/app``.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import subprocess
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BUSYBOX = Path("/bin/busybox")
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
DEFAULT_CMD = 'echo "$(cat /etc/greeting) in $(pwd) with $GREETING"'


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass
class Member:
    """One tar member, as a test wants it, hostile or not."""

    name: str
    data: bytes = b""
    kind: bytes = tarfile.REGTYPE
    mode: int = 0o644
    link: str = ""


def layer_tar(members: list[Member]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for member in members:
            info = tarfile.TarInfo(member.name)
            info.type = member.kind
            info.mode = member.mode
            info.linkname = member.link
            if member.kind in (tarfile.CHRTYPE, tarfile.BLKTYPE):
                info.devmajor, info.devminor = 1, 3
            info.size = len(member.data) if member.kind == tarfile.REGTYPE else 0
            archive.addfile(info, io.BytesIO(member.data) if member.data else None)
    return buffer.getvalue()


def directory(name: str, mode: int = 0o755) -> Member:
    return Member(name, kind=tarfile.DIRTYPE, mode=mode)


def symlink(name: str, target: str) -> Member:
    return Member(name, kind=tarfile.SYMTYPE, mode=0o777, link=target)


def busybox_layers() -> list[bytes]:
    applets = subprocess.run(
        [str(BUSYBOX), "--list"], capture_output=True, text=True, check=True
    ).stdout.split()
    base = [
        directory("bin"),
        Member("bin/busybox", BUSYBOX.read_bytes(), mode=0o755),
        *(symlink(f"bin/{applet}", "busybox") for applet in applets if applet != "busybox"),
        directory("etc"),
        Member("etc/greeting", b"from the base layer\n"),
        Member("etc/removed", b"whited out above\n"),
        directory("opt"),
        directory("opt/old"),
        Member("opt/old/file", b"in a directory whited out above\n"),
        directory("app"),
    ]
    top = [
        directory("etc"),
        Member("etc/greeting", b"from the top layer\n"),
        Member("etc/.wh.removed"),
        Member("opt/.wh.old"),
    ]
    return [layer_tar(base), layer_tar(top)]


def image_config(layers: list[bytes], **run: Any) -> bytes:
    config = {
        "Entrypoint": ["/bin/sh", "-c"],
        "Cmd": [DEFAULT_CMD],
        "Env": ["PATH=/bin", "GREETING=hello from the image"],
        "WorkingDir": "/app",
        **run,
    }
    document = {
        "architecture": "amd64",
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [digest(layer) for layer in layers]},
    }
    return json.dumps(document).encode()


@dataclass
class Image:
    """An image as a registry serves it: blobs by digest, and the manifest's digest."""

    layers: list[bytes]
    config: bytes
    compress: bool = True
    blobs: dict[str, bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        stored = [gzip.compress(layer, mtime=0) if self.compress else layer
                  for layer in self.layers]  # fmt: skip
        layer_type = OCI_LAYER_GZIP if self.compress else OCI_LAYER
        manifest = {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": digest(self.config),
                       "size": len(self.config)},
            "layers": [{"mediaType": layer_type, "digest": digest(blob), "size": len(blob)}
                       for blob in stored],
        }  # fmt: skip
        self.manifest = json.dumps(manifest).encode()
        self.blobs = {digest(blob): blob for blob in [self.config, self.manifest, *stored]}
        self.layer_digests = [digest(blob) for blob in stored]

    @property
    def manifest_digest(self) -> str:
        return digest(self.manifest)

    def oci_archive(self) -> bytes:
        """As ``skopeo copy … oci-archive:`` writes it."""
        index = {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [{"mediaType": OCI_MANIFEST, "digest": self.manifest_digest,
                           "size": len(self.manifest)}],
        }  # fmt: skip
        files = {"oci-layout": b'{"imageLayoutVersion": "1.0.0"}',
                 "index.json": json.dumps(index).encode()}  # fmt: skip
        for name, blob in self.blobs.items():
            files["blobs/sha256/" + name.removeprefix("sha256:")] = blob
        return _tar(files)

    def docker_archive(self) -> bytes:
        """As an older ``docker save`` writes it: manifest.json, <id>/layer.tar."""
        config_name = digest(self.config).removeprefix("sha256:") + ".json"
        names = [f"{number}/layer.tar" for number in range(len(self.layers))]
        saved = [{"Config": config_name, "RepoTags": ["busybox:test"], "Layers": names}]
        files = {"manifest.json": json.dumps(saved).encode(), config_name: self.config}
        files.update(zip(names, self.layers, strict=True))
        return _tar(files)


def busybox_image(compress: bool = True, extra: list[Member] | None = None, **run: Any) -> Image:
    """The busybox image; ``extra`` members make a third layer."""
    layers = busybox_layers() + ([layer_tar(extra)] if extra else [])
    return Image(layers, image_config(layers, **run), compress)


def _tar(files: dict[str, bytes]) -> bytes:
    return layer_tar([Member(name, data) for name, data in files.items()])
