"""/v1/artifacts: uploaded programs (≤ 10 MB), content-addressed by sha256."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response, status
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from herder.api.auth import Caller, StoreDep, Writer
from herder.domain.artifacts import human_size, sniff_media_type
from herder.domain.errors import Invalid, TooLarge
from herder.domain.jobs import MAX_ARTIFACT_BYTES
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
    """Multipart upload with one part named ``file``; the same bytes are stored once."""
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise Invalid("upload the program as multipart/form-data with a part named 'file'")
    async with request.form(max_files=1, max_fields=4) as form:
        extra = sorted(set(form.keys()) - {"file"})
        if extra:
            raise Invalid("the form takes one part, named 'file'", field=extra[0])
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise Invalid("the multipart body needs a file part named 'file'", field="file")
        data = await upload.read(MAX_ARTIFACT_BYTES + 1)
        filename = (upload.filename or "program").rsplit("/", 1)[-1][:255] or "program"
    if "\x00" in filename:  # the one text the NUL guard (api/nul.py) does not scan
        raise Invalid("the file name contains a NUL character (\\u0000)", field="file")
    if len(data) > MAX_ARTIFACT_BYTES:
        raise TooLarge(
            f"{filename} is larger than the artifact limit of {human_size(MAX_ARTIFACT_BYTES)} "
            f"({MAX_ARTIFACT_BYTES} bytes)"
        )
    if not data:
        raise Invalid(f"{filename} is empty", field="file")
    return await run_in_threadpool(
        store.artifacts.put,
        caller.tenant_id,
        data,
        filename=filename,
        media_type=sniff_media_type(data[:512]),
    )


@router.get("/{artifact_id}")
def get_artifact(artifact_id: str, caller: Caller, store: StoreDep) -> Artifact:
    return store.artifacts.get(caller.tenant_id, artifact_id)


@router.get("/{artifact_id}/content", response_class=Response)
def download_artifact(artifact_id: str, caller: Caller, store: StoreDep) -> Response:
    artifact = store.artifacts.get(caller.tenant_id, artifact_id)
    return Response(
        store.artifacts.read(caller.tenant_id, artifact_id),
        media_type=artifact.media_type,
        headers={"Content-Disposition": f'attachment; filename="{artifact.filename}"'},
    )
