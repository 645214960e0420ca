"""The cold tier's S3 store, against moto's S3 in process."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from herder.store.cold.blobs import blob_store_at, put_bytes
from herder.store.cold.s3 import S3BlobStore

moto = pytest.importorskip("moto")
boto3 = pytest.importorskip("boto3")


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with moto.mock_aws():
        client = boto3.client("s3")
        client.create_bucket(Bucket="history")
        yield client


def test_an_s3_store_puts_gets_and_deletes_under_its_prefix(client: Any) -> None:
    blobs = S3BlobStore("history", "/herder/cold/", client)
    put_bytes(blobs, "runs/p20270308/manifest.json", b"{}")
    assert blobs.get("runs/p20270308/manifest.json") == b"{}"
    stored = client.list_objects_v2(Bucket="history")["Contents"]
    assert [item["Key"] for item in stored] == ["herder/cold/runs/p20270308/manifest.json"]
    blobs.delete("runs/p20270308/manifest.json")
    assert blobs.get("runs/p20270308/manifest.json") is None
    blobs.delete("runs/p20270308/manifest.json")  # already gone: nothing happens


def test_an_s3_store_streams_in_and_out(client: Any) -> None:
    blobs = S3BlobStore("history", "cold", client)
    content = b"a checkpoint\x00" * 200_000
    blobs.put_stream("checkpoints/ten_1/abc", io.BytesIO(content))
    pieces = blobs.stream("checkpoints/ten_1/abc")
    assert pieces is not None
    assert b"".join(pieces) == content
    assert blobs.stream("checkpoints/ten_1/missing") is None


def test_an_s3_url_names_the_bucket_and_prefix(client: Any, tmp_path: Path) -> None:
    blobs = blob_store_at("s3://history/cold")
    assert isinstance(blobs, S3BlobStore)
    assert (blobs.bucket, blobs.prefix) == ("history", "cold")
    put_bytes(blobs, "a", b"x")
    assert client.get_object(Bucket="history", Key="cold/a")["Body"].read() == b"x"
