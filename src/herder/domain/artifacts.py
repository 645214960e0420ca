"""What kind of program an upload is, judged by its first bytes, not by its name."""

from __future__ import annotations

ARCHIVE_MEDIA_TYPES = frozenset({"application/gzip", "application/x-tar", "application/zip"})
IMAGE_ARCHIVE_MEDIA_TYPES = frozenset({"application/gzip", "application/x-tar"})


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
