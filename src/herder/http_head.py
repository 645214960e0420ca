"""The HTTP/1.1 protocol every API process serves with: uvicorn's httptools protocol (the
fast one) with a bound on each request's head — its request line and header fields — which
httptools does not have.

Without it a client, no key needed, sends one header of hundreds of MiB: the parser joins
its pieces as they come (the server grew by GiBs) and the event loop spends its time doing
so (other clients' ``/readyz`` waited tens of seconds). Here a head is measured twice, both
before anything of the request reaches the application:

- as it arrives: the bytes read while a head is incomplete, so that a header that never
  ends is refused after one read (up to 256 KiB) past the bound, never buffered whole;
- as it is parsed: the request target and each field, so that a head completed in the
  read that crossed the bound is refused too, exactly at it.

Past ``MAX_HEAD_BYTES`` the request is answered 431 (414 when the request target alone is
past it), past ``MAX_HEADER_FIELDS`` fields 431, and the connection is closed: nothing more
of it is read. Within the bounds a request costs an addition per read and per field.
"""

from __future__ import annotations

import json
from http import HTTPStatus

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_HEAD_BYTES = 64 * 1024  # request line and header fields; nginx's default is 32 KiB
MAX_HEADER_FIELDS = 100  # gunicorn's default
# An idle connection is closed by the server only after its clients stopped reusing it (the
# Python client's ``KEEP_ALIVE_SECONDS``), so a request is never sent on a connection the
# server is closing that instant: with both at uvicorn's and httpx's 5 s, a POST sent after
# 5 s idle was now and then reset.
SERVER_KEEP_ALIVE_SECONDS = 20
_FIELD_FRAMING = 4  # ": " and CRLF around each field's name and value


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` refusing a request whose head is past the bounds."""

    _read: int | None = 0  # bytes read of the head being received; None: it is complete
    _parsed = 0  # bytes of the head parsed: target, names and values
    _fields = 0
    _refused = False  # answered and closing: nothing more is parsed or served

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._read is not None:
            self._read += len(data)
        super().data_received(data)
        if self._read is not None and self._read > MAX_HEAD_BYTES and not self._refused:
            self._refuse_head()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._parsed = self._fields = 0

    def on_url(self, url: bytes) -> None:
        if not self._refused:
            super().on_url(url)
            self._parsed += len(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._fields += 1
        self._parsed += len(name) + len(value) + _FIELD_FRAMING
        if not self._refused and self._fields <= MAX_HEADER_FIELDS:
            super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._read = None
        if self._refused:
            return
        if self._fields > MAX_HEADER_FIELDS:
            self._refuse(
                HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                f"a request has at most {MAX_HEADER_FIELDS} header fields",
            )
        elif self._parsed > MAX_HEAD_BYTES:
            self._refuse_head()
        else:
            super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if not self._refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if not self._refused:
            super().on_message_complete()
            self._read = 0  # the next request's head starts

    def _refuse_head(self) -> None:
        if len(self.url) > MAX_HEAD_BYTES:  # the parser began the message at its first byte
            self._refuse(
                HTTPStatus.REQUEST_URI_TOO_LONG,
                f"a request's target is at most {MAX_HEAD_BYTES // 1024} KiB",
            )
        else:
            self._refuse(
                HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                f"a request's line and header fields are at most {MAX_HEAD_BYTES // 1024} KiB "
                "in all",
            )

    def _refuse(self, status: HTTPStatus, detail: str) -> None:
        """A problem (as the API's own, docs/api.md) and the connection closed: the rest of
        the head is never read. Behind a pipelined request still being answered, only closed:
        an answer now would cut into that one's."""
        self._refused = True
        if self.cycle is None or self.cycle.response_complete:
            body = json.dumps(
                {"type": "about:blank", "title": status.phrase, "status": status.value,
                 "detail": detail}
            ).encode()  # fmt: skip
            head = [f"HTTP/1.1 {status.value} {status.phrase}".encode()]
            head += [name + b": " + value for name, value in self.server_state.default_headers]
            head += [
                b"content-type: application/problem+json",
                b"content-length: " + str(len(body)).encode(),
                b"connection: close",
            ]
            self.transport.write(b"\r\n".join(head) + b"\r\n\r\n" + body)
        self.transport.close()
