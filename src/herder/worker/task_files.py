"""The files through which a job and Herder pass data, in its workspace:

    .herder-inputs.json   a workflow task's inputs, written by the worker before the job
                          starts, owned by the job ($HERDER_INPUTS; tasks only)
    .herder-output.json   the job's output, if it writes one ($HERDER_OUTPUT)

Nothing is made for a run that is not a task: an attempt that writes nothing leaves its
workspace empty, removed with one ``rmdir``.

The output is read when the job has exited 0, while the attempt's disk (or workspace) is
still there. Everything under the workspace is the job's, so the read trusts nothing it
finds: no symbolic link is followed at any step, only a regular file is read (a FIFO would
block, a device never end), and no more than the limit plus one byte, from one descriptor
(a file renamed or replaced meanwhile changes nothing of what is read). What cannot be kept
fails the attempt with the reason (``OutputRefused``).

Writing inputs blocks on the disk (the agent calls it through ``asyncio.to_thread``);
reading the output is a few system calls on the workspace, at most 64 KiB read.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

from pydantic import JsonValue

from herder.domain.outputs import MAX_OUTPUT_BYTES, output_problem, too_large

INPUTS = ".herder-inputs.json"
OUTPUT = ".herder-output.json"
OUTPUT_SUBJECT = "the output written to $HERDER_OUTPUT"
_NO_FOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY


class OutputRefused(Exception):
    """The job wrote an output that cannot be kept; the message says why, to its user."""


def write_inputs(workspace: Path, uid: int | None, inputs: dict[str, JsonValue]) -> None:
    """A task's inputs, in a workspace the job has not touched yet, owned by ``uid`` (the
    worker's own user when None). A file of that name already there (from the job's
    archive) is refused, never used."""
    directory = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | _NO_FOLLOW)
    try:
        _write_inputs(directory, uid, inputs)
    finally:
        os.close(directory)


def _write_inputs(directory: int, uid: int | None, inputs: dict[str, JsonValue]) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NO_FOLLOW
    descriptor = os.open(INPUTS, flags, 0o600, dir_fd=directory)
    with open(descriptor, "wb") as sink:
        if uid is not None:
            os.fchown(descriptor, uid, uid)
        sink.write(json.dumps(inputs, ensure_ascii=False).encode())


def read_output(workspace: Path) -> JsonValue:
    """What the job wrote to ``$HERDER_OUTPUT``: None when it wrote nothing there;
    ``OutputRefused`` when it is not a plain file of at most 64 KiB of storable JSON."""
    try:
        data, size = _read_bounded(workspace)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise OutputRefused(f"{OUTPUT_SUBJECT} could not be read: {_why(error)}") from error
    if len(data) > MAX_OUTPUT_BYTES:
        raise OutputRefused(f"{OUTPUT_SUBJECT} {too_large(max(size, len(data)))}")
    try:
        value: JsonValue = json.loads(data.decode(), parse_constant=_refuse_constant)
    except UnicodeDecodeError as error:
        raise OutputRefused(f"{OUTPUT_SUBJECT} is not UTF-8: {error.reason}") from error
    except json.JSONDecodeError as error:
        where = f"line {error.lineno} column {error.colno}"
        raise OutputRefused(f"{OUTPUT_SUBJECT} is not JSON: {error.msg} at {where}") from error
    except (RecursionError, ValueError) as error:  # nesting, digits, constants
        raise OutputRefused(f"{OUTPUT_SUBJECT} is not JSON Herder can keep: {error}") from error
    problem = output_problem(value, OUTPUT_SUBJECT)
    if problem is not None:
        raise OutputRefused(problem)
    return value


def _read_bounded(workspace: Path) -> tuple[bytes, int]:
    """At most the limit and one byte of the output file, and the size it claims."""
    directory = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | _NO_FOLLOW)
    try:  # non-blocking: opening a FIFO must not wait for a writer
        descriptor = os.open(OUTPUT, os.O_RDONLY | os.O_NONBLOCK | _NO_FOLLOW, dir_fd=directory)
    finally:
        os.close(directory)
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise OSError(errno.EINVAL, "it is not a regular file")
        chunks: list[bytes] = []
        wanted = MAX_OUTPUT_BYTES + 1
        while wanted > 0 and (chunk := os.read(descriptor, wanted)):
            chunks.append(chunk)
            wanted -= len(chunk)
        return b"".join(chunks), status.st_size
    finally:
        os.close(descriptor)


def _why(error: OSError) -> str:
    if error.errno == errno.ELOOP:
        return "it is a symbolic link, which is never followed"
    return error.strerror or str(error)


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")
