"""The OCI image format's JSON, as an archive (``oci_archive.py``) and a registry
(``oci_registry.py``) hand it over: an index chooses a manifest, a manifest names the config
and the layers by digest.

Docker's media types are the same documents under other names (``docker save`` and
registries still serve them), so both are read alike.
"""

from __future__ import annotations

import hashlib
import platform
import re
from dataclasses import dataclass
from typing import Any

from herder.domain.images import ImageProblem

INDEX_TYPES = frozenset({
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
})  # fmt: skip
MANIFEST_TYPES = frozenset({
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
})  # fmt: skip
ACCEPTED_TYPES = ", ".join(sorted(INDEX_TYPES | MANIFEST_TYPES))
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_ARCHITECTURES = {"x86_64": "amd64", "aarch64": "arm64"}
ARCHITECTURE = _ARCHITECTURES.get(platform.machine(), platform.machine())


@dataclass(frozen=True)
class Manifest:
    """One image: its config's digest and its layers' digests, bottom first."""

    config: str
    layers: tuple[str, ...]


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def verified(data: bytes, digest: str, what: str) -> bytes:
    """``data`` if it is what ``digest`` names; ``ImageProblem`` if it was changed."""
    if digest_of(data) != digest:
        raise ImageProblem(f"{what} does not match its digest {digest} (changed or corrupt)")
    return data


def check_digest(digest: object, what: str) -> str:
    if not isinstance(digest, str) or not _DIGEST.match(digest):
        raise ImageProblem(f"{what} is not named by a sha256 digest: {digest!r}")
    return digest


def is_index(parsed: dict[str, Any]) -> bool:
    return parsed.get("mediaType") in INDEX_TYPES or (
        "manifests" in parsed and "layers" not in parsed
    )


def chosen_manifest(index: dict[str, Any]) -> str:
    """The digest of the index's manifest for this machine (linux, its architecture), else
    of the only one it has."""
    entries = index.get("manifests")
    if not isinstance(entries, list) or not entries:
        raise ImageProblem("its index lists no manifest")
    candidates = [entry for entry in entries if isinstance(entry, dict)]
    for entry in candidates:
        wanted = entry.get("platform") or {}
        if wanted.get("os") == "linux" and wanted.get("architecture") == ARCHITECTURE:
            return check_digest(entry.get("digest"), "its manifest")
    unplatformed = [entry for entry in candidates if not entry.get("platform")]
    if len(candidates) == 1 or len(unplatformed) == 1:
        return check_digest((unplatformed or candidates)[0].get("digest"), "its manifest")
    raise ImageProblem(f"its index has no manifest for linux/{ARCHITECTURE}")


def manifest_of(parsed: dict[str, Any]) -> Manifest:
    config = parsed.get("config")
    layers = parsed.get("layers")
    if not isinstance(config, dict) or not isinstance(layers, list):
        raise ImageProblem("its manifest names no config or no layers")
    digests = [
        check_digest(layer.get("digest") if isinstance(layer, dict) else None, "a layer")
        for layer in layers
    ]
    return Manifest(check_digest(config.get("digest"), "its config"), tuple(digests))
