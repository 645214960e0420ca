"""The streamed upload's body: as long as it says, the file name written as browsers write
it, progress told after every chunk, and a file that shrinks refused rather than sent short."""

from __future__ import annotations

from pathlib import Path

import pytest

from herder.client import ClientError
from herder.client.uploads import CHUNK_BYTES, MultipartUpload


def test_the_body_is_as_long_as_its_header_says_and_holds_the_bytes(tmp_path: Path) -> None:
    data = bytes(range(256)) * 1000
    (tmp_path / "p.bin").write_bytes(data)
    sent: list[tuple[int, int]] = []
    with (tmp_path / "p.bin").open("rb") as file:
        upload = MultipartUpload(file, 'a "b"\\c\r\n.bin', lambda *at: sent.append(at))
        body = b"".join(upload)
    assert len(body) == int(upload.headers["Content-Length"])
    boundary = upload.headers["Content-Type"].removeprefix("multipart/form-data; boundary=")
    assert body.startswith(f"--{boundary}\r\n".encode())
    assert b'name="file"; filename="a %22b%22\\\\c%0D%0A.bin"\r\n' in body
    assert data in body
    assert body.endswith(f"\r\n--{boundary}--\r\n".encode())
    assert [done for done, _ in sent] == [0, *range(CHUNK_BYTES, len(data), CHUNK_BYTES), len(data)]


def test_a_file_that_shrinks_while_it_is_sent_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.bin"
    path.write_bytes(b"x" * (3 * CHUNK_BYTES))
    with path.open("rb") as file:
        upload = MultipartUpload(file, "p.bin")
        path.write_bytes(b"x" * CHUNK_BYTES)
        with pytest.raises(ClientError, match=r"p\.bin shrank"):
            b"".join(upload)
