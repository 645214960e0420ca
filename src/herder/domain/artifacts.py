"""Uploaded programs: what kind one is, judged by its first bytes, not by its name; where
its bytes are kept (docs/design.md §2)."""

from __future__ import annotations

import re
from enum import StrEnum

ARCHIVE_MEDIA_TYPES = frozenset({"application/gzip", "application/x-tar", "application/zip"})
IMAGE_ARCHIVE_MEDIA_TYPES = frozenset({"application/gzip", "application/x-tar"})
SNIFFED_BYTES = 512  # what ``sniff_media_type`` looks at
_SHA256 = re.compile(r"[0-9a-f]{64}")


class ArtifactLocation(StrEnum):
    """Where an artifact's bytes are."""

    DATABASE = "database"  # in ``blobs``: uploaded before revision 0033, until moved
    BLOB_STORE = "blob_store"  # a file or object in the blob store, under ``artifact_key``


def artifact_key(tenant_id: str, sha256: str) -> str:
    """An artifact's key in the blob store: one per tenant and content, so a tenant's bytes
    are never found through another's row."""
    return f"artifacts/{tenant_id}/{sha256}"


def is_sha256(text: str) -> bool:
    """Whether ``text`` can name an artifact: 64 lowercase hex digits."""
    return _SHA256.fullmatch(text) is not None


def sniff_media_type(head: bytes) -> str:
    if head.startswith(b"\x1f\x8b"):
        return "application/gzip"
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return "application/zip"
    if head[257:262] == b"ustar":
        return "application/x-tar"
    if head.startswith(b"\x7fELF"):
        return "application/x-executable"
    if head.startswith(b"#!"):
        return "text/x-script"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        return "application/octet-stream"
    return "text/plain"


def human_size(size: int) -> str:
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"
