"""A run's output: the JSON its job wrote to ``$HERDER_OUTPUT``, kept on the run when it
succeeds and handed to the workflow tasks downstream of it.

The one rule of what output is kept, checked twice: by the worker that read the file, and by
the server, which never trusts a worker's word (a hostile worker could send anything the
request's JSON can hold). An output that breaks it fails its attempt, with the reason.

The bounds keep every output storable and passable on both stores: at most 64 KiB as JSON,
nested at most ``MAX_OUTPUT_DEPTH`` deep (the request validation refuses deeper values, and
the encoders recurse), finite numbers only (PostgreSQL's ``jsonb`` has no NaN or Infinity),
and no NUL (which no text column of PostgreSQL takes, and the API refuses anywhere).
"""

from __future__ import annotations

import json
import math

MAX_OUTPUT_BYTES = 64 * 1024
MAX_OUTPUT_DEPTH = 100  # arrays and objects within one another


def encoded_output(value: object) -> bytes:
    """The output as the stores keep it, compact; its length is what the limit counts."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def output_problem(value: object, subject: str = "the output") -> str | None:
    """Why ``value`` cannot be kept as a run's output, starting with ``subject``; None if
    it can."""
    unfit = _unfit_part(value)
    if unfit is not None:
        return f"{subject} {unfit}"
    size = len(encoded_output(value))
    if size > MAX_OUTPUT_BYTES:
        return f"{subject} {too_large(size)}"
    return None


def too_large(size: int) -> str:
    return f"is {size:,} bytes; at most {MAX_OUTPUT_BYTES:,} (64 KiB) are kept"


def _unfit_part(value: object) -> str | None:
    """What in ``value`` is not plain, storable JSON; walked without recursion, since its
    depth is what is being checked."""
    pending: list[tuple[object, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict | list):
            if depth >= MAX_OUTPUT_DEPTH:
                return f"is nested more than {MAX_OUTPUT_DEPTH} levels deep"
            if isinstance(item, dict):
                for key, inner in item.items():
                    if not isinstance(key, str):
                        return "has an object key that is not a string"
                    if "\x00" in key:
                        return "contains a NUL character (\\u0000)"
                    pending.append((inner, depth + 1))
            else:
                pending.extend((inner, depth + 1) for inner in item)
        elif isinstance(item, str):
            if "\x00" in item:
                return "contains a NUL character (\\u0000)"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"contains the number {item}, which JSON cannot hold"
        elif item is not None and not isinstance(item, bool | int):
            return f"contains a {type(item).__name__}, which is not JSON"
    return None
