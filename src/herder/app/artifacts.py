"""Uploaded programs: what an upload must be before its bytes are stored, measured as they
stream by; and the move of artifacts uploaded before revision 0033 from the database to the
blob store (``herder system move-artifacts``)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import IO

from herder.domain.artifacts import SNIFFED_BYTES, human_size, sniff_media_type
from herder.domain.errors import Invalid, TooLarge
from herder.domain.jobs import MAX_ARTIFACT_BYTES
from herder.domain.models import Artifact
from herder.store.store import Store

MAX_FILENAME_CHARS = 255
PIECE_BYTES = 1024 * 1024  # an upload is read this much at a time, never whole
MOVE_BATCH = 100  # artifacts listed at a time by the move; each then moves alone
FORGET_BATCH = 1_000  # unnamed ``blobs`` rows looked for at a time after it


@dataclass(frozen=True)
class Measured:
    sha256: str
    size: int
    head: bytes  # the first bytes, to tell what kind of program it is


@dataclass
class Moved:
    """What a move did: artifacts moved now, those left in the database because their bytes
    there are not what their sha256 names (tenant, sha256), and ``blobs`` rows deleted."""

    moved: int = 0
    damaged: list[tuple[str, str]] = field(default_factory=list)
    forgotten: int = 0


def stored_filename(given: str | None) -> str:
    """The name an upload is kept under: its last path part, at most 255 characters."""
    return (given or "program").rsplit("/", 1)[-1][:MAX_FILENAME_CHARS] or "program"


def upload(store: Store, tenant_id: str, content: IO[bytes], filename: str) -> Artifact:
    """Refuse an upload that is badly named, over the limit or empty, before any of it is
    stored; store the rest, the same bytes once per tenant (content-addressed by sha256)."""
    if "\x00" in filename:  # the one text the NUL guard (api/nul.py) does not scan
        raise Invalid("the file name contains a NUL character (\\u0000)", field="file")
    measured = measure(content, filename)
    if measured.size == 0:
        raise Invalid(f"{filename} is empty", field="file")
    return store.artifacts.put(
        tenant_id,
        content,
        sha256=measured.sha256,
        size=measured.size,
        filename=filename,
        media_type=sniff_media_type(measured.head),
    )


def measure(content: IO[bytes], filename: str) -> Measured:
    """The sha256, size and head of ``content`` from its start, read a piece at a time;
    ``TooLarge`` as soon as it is past the artifact limit."""
    digest, size, head = hashlib.sha256(), 0, b""
    content.seek(0)
    while piece := content.read(PIECE_BYTES):
        size += len(piece)
        if size > MAX_ARTIFACT_BYTES:
            raise TooLarge(
                f"{filename} is larger than the artifact limit of "
                f"{human_size(MAX_ARTIFACT_BYTES)} ({MAX_ARTIFACT_BYTES} bytes)"
            )
        head += piece[: SNIFFED_BYTES - len(head)]
        digest.update(piece)
    return Measured(digest.hexdigest(), size, head)


def move_to_blob_store(store: Store) -> Moved:
    """Move every artifact whose bytes are in the database to the blob store, one at a time,
    checked against its sha256 first (bytes that are not are left, and said). Safe beside
    running servers and to stop at any point: run again, it goes on with what is left."""
    done, after = Moved(), None
    while keys := store.artifacts.in_database(after, MOVE_BATCH):
        for tenant_id, sha256 in keys:
            data = store.artifacts.database_bytes(sha256)
            if data is None or hashlib.sha256(data).hexdigest() != sha256:
                done.damaged.append((tenant_id, sha256))
                continue
            done.moved += store.artifacts.move(tenant_id, sha256, data)
        after = keys[-1]
    while forgotten := store.artifacts.forget_unnamed_bytes(FORGET_BATCH):
        done.forgotten += forgotten
    return done
