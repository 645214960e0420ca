"""The cold tier in S3-compatible object storage, through boto3 (``pip install
'herder[s3]'``). The endpoint and credentials come from boto3's usual settings
(``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID`` …), so MinIO or Ceph work as AWS does. A put is
one object: a reader never sees half of one."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

READ_BYTES = 1024 * 1024  # a streamed read's piece


class S3BlobStore:
    """Keys under ``prefix`` in ``bucket``."""

    def __init__(self, bucket: str, prefix: str = "", client: Any = None) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        # imported here: boto3 is an optional extra, needed only by this store
        self._client = client or importlib.import_module("boto3").client("s3")

    def put(self, key: str, source: Path) -> None:
        self._client.upload_file(str(source), self.bucket, self._name(key))

    def put_stream(self, key: str, source: IO[bytes]) -> None:
        self._client.upload_fileobj(source, self.bucket, self._name(key))

    def get(self, key: str) -> bytes | None:
        body = self._body(key)
        return None if body is None else bytes(body.read())

    def stream(self, key: str) -> Iterator[bytes] | None:
        body = self._body(key)
        return None if body is None else iter(body.iter_chunks(READ_BYTES))

    def _body(self, key: str) -> Any:
        try:
            answer = self._client.get_object(Bucket=self.bucket, Key=self._name(key))
        except self._client.exceptions.NoSuchKey:
            return None
        return answer["Body"]

    def delete(self, key: str) -> None:
        self._client.delete_object(Bucket=self.bucket, Key=self._name(key))

    def _name(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key
