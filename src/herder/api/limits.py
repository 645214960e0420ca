"""Body size limits, enforced while the body arrives, so an oversize upload is refused
without being buffered whole (413 with the limit in the message)."""

from __future__ import annotations

import re

from starlette.types import Message, Receive, Scope, Send

from herder.api.errors import herder_problem
from herder.api.middleware import HttpMiddleware
from herder.domain.artifacts import human_size
from herder.domain.checkpoints import MIB
from herder.domain.errors import TooLarge
from herder.domain.events import MAX_PAYLOAD_BYTES
from herder.domain.jobs import MAX_ARTIFACT_BYTES, MAX_CHECKPOINT_MB

DEFAULT_BODY_LIMIT = 4 * 1024 * 1024
MULTIPART_OVERHEAD = 64 * 1024
EVENT_ENVELOPE = 8 * 1024  # an event's name and id around its payload
IMPORT_BODY_LIMIT = 64 * MIB  # a tenant's definitions moving in from another cell
BODY_LIMITS = {
    "/v1/artifacts": MAX_ARTIFACT_BYTES + MULTIPART_OVERHEAD,
    "/v1/tenants/import": IMPORT_BODY_LIMIT,
    "/v1/events": MAX_PAYLOAD_BYTES + EVENT_ENVELOPE,
}
# An inbound webhook's delivery: its body is the event's payload.
HOOK_DELIVERY = re.compile(r"^/v1/hooks/[^/]+/?$")
# A worker's checkpoint upload: raw bytes (``application/octet-stream``), streamed to the store
# by its route, which bounds it by the job's own checkpoint_mb; here, by the schema's bound.
RAW_UPLOAD = re.compile(r"^/v1/workers/[^/]+/attempts/[^/]+/checkpoint/?$")
RAW_UPLOAD_LIMIT = MAX_CHECKPOINT_MB * MIB
# A program of a tenant moving in from another cell: raw bytes, bounded as an upload's.
IMPORTED_ARTIFACT = re.compile(r"^/v1/tenants/[^/]+/import/artifacts/[^/]+/?$")


def is_raw_upload(scope: Scope) -> bool:
    """A body of bytes, not JSON: no NUL check (``nul.py``) applies to it."""
    return scope["method"] == "PUT" and (
        RAW_UPLOAD.match(scope["path"]) is not None
        or IMPORTED_ARTIFACT.match(scope["path"]) is not None
    )


def body_limit(scope: Scope) -> int:
    if scope["method"] == "PUT" and IMPORTED_ARTIFACT.match(scope["path"]):
        return MAX_ARTIFACT_BYTES
    if is_raw_upload(scope):
        return RAW_UPLOAD_LIMIT
    if scope["method"] == "POST" and HOOK_DELIVERY.match(scope["path"]):
        return MAX_PAYLOAD_BYTES
    return BODY_LIMITS.get(scope["path"].rstrip("/"), DEFAULT_BODY_LIMIT)


def too_large_message(size: int | None, limit: int) -> str:
    got = f"is {human_size(size)}" if size is not None else "is larger than that"
    return f"the request body {got}; the limit is {human_size(limit)} ({limit} bytes)"


class BodyLimit(HttpMiddleware):
    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = body_limit(scope)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            response = herder_problem(TooLarge(too_large_message(int(declared), limit)))
            await response(scope, receive, send)
            return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > limit:
                raise TooLarge(too_large_message(None, limit))
            return message

        await self.app(scope, limited_receive, send)
