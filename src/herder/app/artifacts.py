"""Uploaded programs: what an upload must be before its bytes are stored, and reading them
back."""

from __future__ import annotations

from herder.domain.artifacts import human_size, sniff_media_type
from herder.domain.errors import Invalid, TooLarge
from herder.domain.jobs import MAX_ARTIFACT_BYTES
from herder.domain.models import Artifact
from herder.store.store import Store

MAX_FILENAME_CHARS = 255


def stored_filename(given: str | None) -> str:
    """The name an upload is kept under: its last path part, at most 255 characters."""
    return (given or "program").rsplit("/", 1)[-1][:MAX_FILENAME_CHARS] or "program"


def upload(store: Store, tenant_id: str, data: bytes, filename: str) -> Artifact:
    """Refuse an upload that is badly named, over the limit or empty; store the rest, the
    same bytes once (content-addressed by sha256)."""
    if "\x00" in filename:  # the one text the NUL guard (api/nul.py) does not scan
        raise Invalid("the file name contains a NUL character (\\u0000)", field="file")
    if len(data) > MAX_ARTIFACT_BYTES:
        raise TooLarge(
            f"{filename} is larger than the artifact limit of {human_size(MAX_ARTIFACT_BYTES)} "
            f"({MAX_ARTIFACT_BYTES} bytes)"
        )
    if not data:
        raise Invalid(f"{filename} is empty", field="file")
    return store.artifacts.put(
        tenant_id, data, filename=filename, media_type=sniff_media_type(data[:512])
    )


def download(store: Store, tenant_id: str, artifact_id: str) -> tuple[Artifact, bytes]:
    """The artifact and its bytes."""
    artifact = store.artifacts.get(tenant_id, artifact_id)
    return artifact, store.artifacts.read(tenant_id, artifact_id)
