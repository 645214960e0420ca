"""A request's head (its line and header fields) is bounded as it arrives: past the bounds
it is answered 431 (414 for the line alone) and the connection closed before the rest is
read, whatever route it names; within them, and whatever its body, it is served as ever."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from uvicorn.server import ServerState

from herder.http_head import MAX_HEAD_BYTES, MAX_HEADER_FIELDS, BoundedHttpToolsProtocol

PIECE = 64 * 1024  # what a client's writes may arrive as


class Transport(asyncio.Transport):
    """What the protocol writes, and whether it closed the connection."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


@dataclass
class Served:
    answer: bytes
    closed: bool
    fed: int  # bytes given to the protocol before it closed the connection (or all)
    requests: list[str] = field(default_factory=list)  # the paths the app was called for

    @property
    def status(self) -> int:
        return int(self.answer.split(b" ", 2)[1])

    def problem(self) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.answer.split(b"\r\n\r\n", 1)[1])
        return found


def serve(pieces: Iterable[bytes]) -> Served:
    """Feed ``pieces`` to one connection as they would arrive, until it is closed."""
    requests: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        while (await receive())["more_body"]:
            pass
        requests.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    async def connection() -> Served:
        config = uvicorn.Config(app, http=BoundedHttpToolsProtocol, lifespan="off")
        config.load()
        protocol = BoundedHttpToolsProtocol(
            config, ServerState(), {}, _loop=asyncio.get_running_loop()
        )
        transport = Transport()
        protocol.connection_made(transport)
        fed = 0
        for piece in pieces:
            protocol.data_received(piece)
            fed += len(piece)
            await asyncio.sleep(0)  # the app's task runs
            if transport.closed:
                break
        for _ in range(10):  # the last answer is written
            await asyncio.sleep(0)
        served = Served(bytes(transport.written), transport.closed, fed, requests)
        protocol.connection_lost(None)
        return served

    return asyncio.run(connection())


def in_pieces(data: bytes) -> list[bytes]:
    return [data[start : start + PIECE] for start in range(0, len(data), PIECE)]


def head(path: str = "/readyz", fields: Iterable[tuple[str, str]] = ()) -> bytes:
    lines = [f"GET {path} HTTP/1.1", "Host: herder", *(f"{n}: {v}" for n, v in fields)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def huge_header() -> Iterable[bytes]:
    """One header of 8 MiB, never ended: the protocol must stop reading long before."""
    yield b"GET /v1/jobs HTTP/1.1\r\nHost: herder\r\nX-Big: "
    for _ in range(8 * 1024 * 1024 // PIECE):
        yield b"a" * PIECE


def test_a_head_within_the_bounds_is_served() -> None:
    fields = [(f"X-Field-{n}", "v" * 500) for n in range(MAX_HEADER_FIELDS - 1)]
    request = head(fields=fields)
    assert MAX_HEAD_BYTES - PIECE < len(request) <= MAX_HEAD_BYTES
    served = serve(in_pieces(request))
    assert served.status == 200
    assert served.requests == ["/readyz"]


def test_one_huge_header_is_431_before_more_than_a_read_past_the_bound_is_taken() -> None:
    served = serve(huge_header())
    assert served.status == 431
    assert served.closed
    assert served.fed <= MAX_HEAD_BYTES + PIECE
    assert served.requests == []
    problem = served.problem()
    assert problem["status"] == 431
    assert "64 KiB" in problem["detail"]
    assert b"content-type: application/problem+json" in served.answer


def test_more_header_fields_than_the_bound_is_431() -> None:
    fields = [("X-A", "1")] * MAX_HEADER_FIELDS  # with Host: one too many
    served = serve([head(fields=fields)])
    assert served.status == 431
    assert f"at most {MAX_HEADER_FIELDS} header fields" in served.problem()["detail"]
    assert served.requests == []


def test_a_huge_request_line_is_414() -> None:
    served = serve(in_pieces(head(path="/v1/runs?" + "a" * (2 * MAX_HEAD_BYTES))))
    assert served.status == 414
    assert served.requests == []


def test_a_large_body_is_no_part_of_the_head() -> None:
    body = b"x" * (4 * MAX_HEAD_BYTES)
    request = (
        b"POST /v1/events HTTP/1.1\r\nHost: herder\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )
    served = serve(in_pieces(request))
    assert served.status == 200
    assert served.requests == ["/v1/events"]


def test_each_request_on_a_kept_alive_connection_has_its_own_bound() -> None:
    near_the_bound = head(fields=[("X-Pad", "p" * (MAX_HEAD_BYTES - 200))])
    served = serve([near_the_bound, near_the_bound, near_the_bound])
    assert served.answer.count(b"HTTP/1.1 200 OK") == 3
    assert not served.closed


def test_a_head_past_the_bound_completed_in_one_read_is_431_and_serves_nothing_after() -> None:
    past = head(fields=[("X-Pad", "p" * MAX_HEAD_BYTES)])
    served = serve([past + head(path="/v1/runs")])  # a second request in the same read
    assert served.status == 431
    assert served.closed
    assert served.requests == []
    assert served.answer.count(b"HTTP/1.1") == 1
