"""The edge's forwarding against a cell that echoes what reached it (``edge/forwarding.py``):
hop-by-hop headers, those ``Connection`` names among them, never reach a cell and never come
back; ``X-Forwarded-For`` carries the client; the path and query reach the cell as they were
sent (``/../``, encoded slashes: the cell refuses them as it would unproxied); bodies stream
both ways; a cell's 503 or its silence is the edge's 503 naming it; every answer names the
cell it is from, over whatever the cell said."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from herder.directory.repository import Directory
from herder.edge.app import create_edge_app
from herder.edge.settings import EdgeSettings
from herder.settings import sqlite_url
from tests.integration.served import served


async def echo(request: Request) -> Response:
    if request.url.path == "/silent":
        await asyncio.Event().wait()  # nothing sets it: cancelled when the cell stops
    if request.url.path == "/down":
        return JSONResponse({"detail": "the database is unavailable: gone"}, status_code=503)
    if request.url.path == "/forged":  # a cell (compromised, or misconfigured) naming another
        forged = Response("forged")
        forged.raw_headers += [(b"herder-cell", b"other"), (b"Herder-Cell", b"another"),
                               (b"HERDER-REGION", b"nowhere")]  # fmt: skip
        return forged
    if request.url.path == "/stream":

        async def chunks() -> AsyncIterator[bytes]:
            for number in range(3):
                yield f"chunk {number}\n".encode()

        return StreamingResponse(chunks(), headers={"X-Echo": "1", "Keep-Alive": "timeout=99"})
    body = await request.body()
    seen = {
        "raw_path": request.scope["raw_path"].decode(),
        "query": request.scope["query_string"].decode(),
        "headers": [[name.decode(), value.decode()] for name, value in request.scope["headers"]],
        "body_bytes": len(body),
    }
    return JSONResponse(seen, headers={"Set-Cookie": "a=1", "X-Echo": "1"})


@pytest.fixture
def edge(tmp_path: Path) -> Iterator[httpx.Client]:
    cell = Starlette(routes=[Route("/{path:path}", echo, methods=["GET", "POST", "PUT"])])
    directory = Directory(sqlite_url(tmp_path / "directory.db"))
    try:
        with served(cell) as echoing:
            directory.create_cell("echo", "eu", echoing.url, datetime.now(UTC))
            settings = EdgeSettings(
                directory_url=sqlite_url(tmp_path / "directory.db"), timeout_seconds=0.5
            )
            with (
                served(create_edge_app(settings, directory), proxy_headers=False) as routing,
                httpx.Client(base_url=routing.url, timeout=10) as client,
            ):
                yield client
    finally:
        directory.close()


def seen_headers(answer: httpx.Response) -> dict[str, str]:
    return {name: value for name, value in answer.json()["headers"]}


def test_hop_by_hop_headers_are_dropped_and_the_client_is_forwarded_for(edge: httpx.Client) -> None:
    sent = {
        "Connection": "keep-alive, X-Smuggled, X-Forwarded-For",
        "X-Smuggled": "reaches no cell",
        "Keep-Alive": "timeout=5",
        "Proxy-Authorization": "Basic c2VjcmV0",
        "Proxy-Connection": "keep-alive",
        "TE": "trailers",
        "Upgrade": "h2c",
        "X-Forwarded-For": "203.0.113.9",
        "X-Herder-Cell": "another",
        "Authorization": "Bearer key_01.secret",
    }
    answer = edge.get("/v1/jobs", headers=sent)
    assert answer.status_code == 200, answer.text
    seen = seen_headers(answer)
    for dropped in [
        "x-smuggled",
        "keep-alive",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "upgrade",
    ]:
        assert dropped not in seen, dropped
    assert seen["authorization"] == "Bearer key_01.secret"  # end to end: the cell checks it
    assert seen["x-herder-cell"] == "another"  # passed on, chooses nothing
    # named in Connection yet added by the edge after: the client is still said
    assert seen["x-forwarded-for"] == "203.0.113.9, 127.0.0.1"
    assert seen["host"].startswith("127.0.0.1:")
    assert answer.headers["x-echo"] == "1"
    assert answer.headers["set-cookie"] == "a=1"


def test_an_answer_names_its_cell_whatever_the_cell_or_the_client_said(edge: httpx.Client) -> None:
    for path in ["/forged", "/v1/jobs", "/down"]:
        answer = edge.get(path, headers={"Herder-Cell": "other", "Herder-Region": "nowhere"})
        assert answer.headers.get_list("herder-cell") == ["echo"], path
        assert answer.headers.get_list("herder-region") == ["eu"], path


def test_the_path_and_query_reach_the_cell_as_they_were_sent(edge: httpx.Client) -> None:
    for path in [
        "/v1/jobs/a%2F..%2Fb",
        "/v1/runs?state=queued&state=running&x=%2F",
        "/v1/jobs/%2e%2e",
    ]:
        answer = edge.get(path, headers={"Authorization": "Bearer key_01.secret"})
        assert answer.status_code == 200, (path, answer.text)
        raw, _, query = path.partition("?")
        assert (answer.json()["raw_path"], answer.json()["query"]) == (raw, query)


def test_a_dot_segment_is_not_resolved_by_the_edge(edge: httpx.Client) -> None:
    answer = edge.get("/", extensions={"target": b"/v1/../metrics"})  # sent as it is
    assert answer.json()["raw_path"] == "/v1/../metrics"  # the cell decides: it has no such route


def test_bodies_stream_both_ways(edge: httpx.Client) -> None:
    body = b"x" * (3 * 1024 * 1024)
    sent = edge.post("/upload", content=body, headers={"Content-Type": "application/octet-stream"})
    assert sent.json()["body_bytes"] == len(body)
    chunked = edge.post("/upload", content=iter([b"a" * 1000, b"b" * 1000]))
    assert chunked.json()["body_bytes"] == 2000
    streamed = edge.get("/stream")
    assert streamed.text == "chunk 0\nchunk 1\nchunk 2\n"
    assert streamed.headers["x-echo"] == "1"
    assert "keep-alive" not in streamed.headers


def test_a_cells_503_or_its_silence_is_a_503_naming_it(edge: httpx.Client) -> None:
    for path, reason in [("/down", "the database is unavailable: gone"), ("/silent", "in time")]:
        answer = edge.get(path)
        assert answer.status_code == 503
        assert answer.headers["content-type"] == "application/problem+json"
        assert answer.headers["retry-after"] == "1"
        problem = json.loads(answer.text)
        assert problem["cell"] == "echo"
        assert problem["detail"].startswith("cell echo is unavailable: ")
        assert reason in problem["detail"]


def test_a_length_beside_a_chunked_body_smuggles_nothing(edge: httpx.Client) -> None:
    """The classic desync: a proxy that trusts ``Content-Length`` while the next hop reads
    the chunks would leave ``GET /smuggled`` as a second request on the cell's connection."""
    smuggled = b"0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
    head = (
        b"POST /upload HTTP/1.1\r\nHost: edge\r\nTransfer-Encoding: chunked\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(smuggled)
    )
    url = httpx.URL(str(edge.base_url))
    with socket.create_connection((url.host, url.port or 80), timeout=10) as connection:
        connection.sendall(head + smuggled)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    status = int(answer.split(b" ", 2)[1])
    assert status in (200, 400), answer[:300]  # refused, or one request of an empty body
    if status == 200:
        assert b'"body_bytes":0' in answer
    assert b"smuggled" not in answer.split(b"\r\n\r\n", 1)[1]
