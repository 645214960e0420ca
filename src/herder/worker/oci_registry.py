"""An image fetched from a registry the operator allows, over the OCI distribution API
(``GET /v2/<name>/manifests/<digest>``, ``GET /v2/<name>/blobs/<digest>``), anonymously.

The reference is pinned by digest, so every document and blob is checked against the digest
that named it before it is used: a registry (or anything between) that changes a byte fails
the attempt, it never runs what it was not asked to.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

import httpx

from herder.domain.images import MAX_CONFIG_BYTES, ImageProblem, ImageReference, json_object
from herder.worker.oci import (
    ACCEPTED_TYPES,
    Manifest,
    chosen_manifest,
    is_index,
    manifest_of,
    verified,
)

MAX_NESTED_INDEXES = 4
CHUNK_BYTES = 1024 * 1024


class Registry:
    """One allowed registry, at ``base_url``."""

    def __init__(self, base_url: str, client: httpx.AsyncClient) -> None:
        self._base = base_url.rstrip("/")
        self._client = client

    async def manifest(self, reference: ImageReference) -> Manifest:
        """The manifest the reference pins (through its index, for this machine)."""
        digest = reference.digest
        for _ in range(MAX_NESTED_INDEXES):
            url = f"{self._base}/v2/{reference.name}/manifests/{digest}"
            data = await self._small(url, {"Accept": ACCEPTED_TYPES}, f"manifest {digest}")
            parsed = json_object(verified(data, digest, f"manifest {digest}"), f"manifest {digest}")
            if not is_index(parsed):
                return manifest_of(parsed)
            digest = chosen_manifest(parsed)
        raise ImageProblem(f"its indexes nest more than {MAX_NESTED_INDEXES} deep")

    async def config(self, reference: ImageReference, digest: str) -> bytes:
        url = f"{self._base}/v2/{reference.name}/blobs/{digest}"
        return verified(await self._small(url, {}, "its config"), digest, "its config")

    async def blob_to(
        self, reference: ImageReference, digest: str, target: Path, max_bytes: int
    ) -> None:
        """The blob saved at ``target`` (atomically, once checked), at most ``max_bytes``."""
        url = f"{self._base}/v2/{reference.name}/blobs/{digest}"
        partial = target.with_name(f".{target.name}.{os.getpid()}.{id(self)}")
        hashed = hashlib.sha256()
        size = 0
        try:
            async with self._client.stream("GET", url) as response:
                _check(response, f"layer {digest}")
                with partial.open("wb") as sink:
                    async for chunk in response.aiter_bytes(CHUNK_BYTES):
                        size += len(chunk)
                        if size > max_bytes:
                            raise ImageProblem(
                                f"layer {digest} is larger than {max_bytes // (1024 * 1024)} MiB"
                            )
                        hashed.update(chunk)
                        sink.write(chunk)
            if "sha256:" + hashed.hexdigest() != digest:
                raise ImageProblem(
                    f"layer {digest} from {self._base} does not match its digest "
                    "(changed or corrupt): not run"
                )
            partial.chmod(0o400)
            partial.replace(target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                partial.unlink()

    async def _small(self, url: str, headers: dict[str, str], what: str) -> bytes:
        async with self._client.stream("GET", url, headers=headers) as response:
            _check(response, what)
            data = b""
            async for chunk in response.aiter_bytes(CHUNK_BYTES):
                data += chunk
                if len(data) > MAX_CONFIG_BYTES:
                    raise ImageProblem(f"{what} is larger than {MAX_CONFIG_BYTES} bytes")
            return data


def _check(response: httpx.Response, what: str) -> None:
    if response.status_code != 200:
        raise ImageProblem(f"the registry answered {response.status_code} for {what}")
