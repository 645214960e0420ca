"""/v1/artifacts: uploaded programs (≤ 10 MB), content-addressed by sha256 per tenant; their
bytes stream to and from the blob store."""

from __future__ import annotations

from fastapi import APIRouter, Request, status
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from herder.api.auth import Caller, StoreDep, Writer
from herder.app import artifacts
from herder.domain.errors import Invalid
from herder.domain.models import Artifact

router = APIRouter(prefix="/v1/artifacts", tags=["artifacts"])


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    openapi_extra={
        "requestBody": {
            "content": {
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "required": ["file"],
                        "properties": {"file": {"type": "string", "format": "binary"}},
                        "additionalProperties": False,
                    }
                }
            },
            "required": True,
        }
    },
)
async def upload_artifact(request: Request, caller: Writer, store: StoreDep) -> Artifact:
    """Multipart upload with one part named ``file``; the same bytes are stored once per
    tenant. The body is bounded as it arrives (``api/limits.py``) and its part kept in a
    temporary file past 1 MiB, then measured and streamed to the blob store."""
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise Invalid("upload the program as multipart/form-data with a part named 'file'")
    async with request.form(max_files=1, max_fields=4) as form:
        extra = sorted(set(form.keys()) - {"file"})
        if extra:
            raise Invalid("the form takes one part, named 'file'", field=extra[0])
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise Invalid("the multipart body needs a file part named 'file'", field="file")
        filename = artifacts.stored_filename(upload.filename)
        return await run_in_threadpool(
            artifacts.upload, store, caller.tenant_id, upload.file, filename
        )


@router.get("/{artifact_id}")
def get_artifact(artifact_id: str, caller: Caller, store: StoreDep) -> Artifact:
    return store.artifacts.get(caller.tenant_id, artifact_id)


@router.get("/{artifact_id}/content", response_class=StreamingResponse)
def download_artifact(artifact_id: str, caller: Caller, store: StoreDep) -> StreamingResponse:
    """The bytes as uploaded, streamed from where they are kept."""
    artifact, content = store.artifacts.read(caller.tenant_id, artifact_id)
    headers = {
        "Content-Length": str(artifact.size),
        "Content-Disposition": f'attachment; filename="{artifact.filename}"',
    }
    return StreamingResponse(content, media_type=artifact.media_type, headers=headers)
