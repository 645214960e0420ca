"""An artifact upload streamed from its file, saying how far it has gone: the multipart body
(one part named ``file``) is sent chunk by chunk with its length known up front, so a
caller can draw a progress bar without the client drawing anything itself."""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Callable, Iterator
from typing import BinaryIO

from herder.client.errors import ClientError

UploadProgress = Callable[[int, int], None]  # (bytes sent, bytes in all)

CHUNK_BYTES = 64 * 1024

# How browsers write a file name in a form part (the HTML standard, as httpx does): the
# quote and the backslash escaped, control characters percent-encoded.
_UNSAFE_IN_FILENAME = re.compile(r'["\\\x00-\x1a\x1c-\x1f]')


def _quoted(filename: str) -> str:
    def escape(match: re.Match[str]) -> str:
        character = match.group()
        return "\\\\" if character == "\\" else f"%{ord(character):02X}"

    return _UNSAFE_IN_FILENAME.sub(escape, filename)


class MultipartUpload:
    """The body of ``POST /v1/artifacts`` for one open file: its headers, then its bytes as
    an iterator that calls ``progress`` after every chunk."""

    def __init__(
        self, file: BinaryIO, filename: str, progress: UploadProgress | None = None
    ) -> None:
        boundary = secrets.token_hex(16)
        self._file = file
        self._filename = filename
        self._size = os.fstat(file.fileno()).st_size
        self._head = (
            f"--{boundary}\r\n"
            f'Content-Disposition: form-data; name="file"; filename="{_quoted(filename)}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        self._tail = f"\r\n--{boundary}--\r\n".encode()
        self._progress = progress
        self.headers = {
            "Content-Type": f"multipart/form-data; boundary={boundary}",
            "Content-Length": str(len(self._head) + self._size + len(self._tail)),
        }

    def __iter__(self) -> Iterator[bytes]:
        yield self._head
        sent = 0
        self._report(sent)
        while sent < self._size:
            chunk = self._file.read(min(CHUNK_BYTES, self._size - sent))
            if not chunk:  # shorter than when the length was sent: the body would be short
                raise ClientError(f"{self._filename} shrank while it was being uploaded")
            sent += len(chunk)
            yield chunk
            self._report(sent)
        yield self._tail

    def _report(self, sent: int) -> None:
        if self._progress is not None:
            self._progress(sent, self._size)
