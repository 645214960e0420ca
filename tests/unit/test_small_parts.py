"""Ids, cursors, media types and the output buffer."""

from __future__ import annotations

import os
import threading

import pytest

from herder.domain.artifacts import sniff_media_type
from herder.domain.errors import Invalid
from herder.domain.ids import new_id
from herder.store.pagination import decode_cursor, encode_cursor
from herder.worker.output import MAX_CHUNK_BYTES, OutputBuffer


def test_ids_sort_by_creation_time_and_carry_their_prefix() -> None:
    ids = [new_id("run", ms) for ms in (1, 2, 10**12, 10**13)]
    assert ids == sorted(ids)
    assert all(identifier.startswith("run_") and len(identifier) == 30 for identifier in ids)
    assert new_id("run", 5) != new_id("run", 5)


def test_ids_drawn_in_bulk_stay_unique_across_threads_and_use_all_their_random_bits() -> None:
    made: list[list[str]] = [[] for _ in range(8)]

    def make(into: list[str]) -> None:
        into.extend(new_id("run", 1) for _ in range(2000))  # several refills each

    threads = [threading.Thread(target=make, args=(into,)) for into in made]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    everyone = [identifier for into in made for identifier in into]
    assert len(set(everyone)) == len(everyone) == 16000
    assert {identifier[14] for identifier in everyone} == set("0123456789ABCDEFGHJKMNPQRSTVWXYZ")


def test_a_forked_child_never_makes_its_parents_next_ids() -> None:
    new_id("run", 1)  # this thread's random bytes drawn, most of them left
    reading, writing = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        os.write(writing, " ".join(new_id("run", 1) for _ in range(50)).encode())
        os._exit(0)
    os.close(writing)
    os.waitpid(child, 0)
    with os.fdopen(reading) as pipe:
        childs = set(pipe.read().split())
    assert len(childs) == 50
    assert childs.isdisjoint(new_id("run", 1) for _ in range(50))


def test_a_cursor_round_trips_and_garbage_is_refused() -> None:
    identifier = new_id("job", 123)
    assert decode_cursor(encode_cursor(identifier)) == identifier
    for garbage in ["", "!!", encode_cursor("not an id")]:
        with pytest.raises(Invalid):
            decode_cursor(garbage)


@pytest.mark.parametrize(
    ("head", "media_type"),
    [
        (b"\x1f\x8b\x08rest", "application/gzip"),
        (b"PK\x03\x04rest", "application/zip"),
        (b"\x7fELF\x02", "application/x-executable"),
        (b"#!/bin/sh\n", "text/x-script"),
        (b"print('hi')\n", "text/plain"),
        (b"\xff\xfe\x00", "application/octet-stream"),
        (b"x" * 257 + b"ustar", "application/x-tar"),
    ],
)
def test_media_type_comes_from_the_bytes(head: bytes, media_type: str) -> None:
    assert sniff_media_type(head) == media_type


def test_output_is_numbered_in_order_and_merged_per_stream() -> None:
    buffer = OutputBuffer()
    buffer.write("stdout", b"a")
    buffer.write("stdout", b"b")
    buffer.write("stderr", b"c")
    chunks = buffer.take()
    assert [(chunk.seq, chunk.stream, chunk.data) for chunk in chunks] == [
        (0, "stdout", b"ab"),
        (1, "stderr", b"c"),
    ]
    buffer.write("stdout", b"d")
    assert [chunk.seq for chunk in buffer.take()] == [2]
    assert not buffer.has_pending


def test_output_past_the_limit_is_dropped_with_one_marker() -> None:
    buffer = OutputBuffer(limit=5)
    buffer.write("stdout", b"1234")
    buffer.write("stdout", b"5678")
    buffer.write("stdout", b"9")
    chunks = buffer.take()
    assert chunks[0].data == b"12345"
    assert chunks[1].stream == "system"
    assert b"output truncated" in chunks[1].data
    assert len(chunks) == 2
    assert buffer.dropped == 4


def test_large_output_is_sent_in_bounded_chunks() -> None:
    buffer = OutputBuffer()
    buffer.write("stdout", b"x" * (MAX_CHUNK_BYTES * 2 + 1))
    assert [len(chunk.data) for chunk in buffer.take()] == [MAX_CHUNK_BYTES, MAX_CHUNK_BYTES, 1]
