"""A run's trace and span ids, derived from its ids alone (docs/traces.md).

A run's life crosses three processes that never share memory — the API server that submits
it, the scheduler whose dispatcher places it, the worker that runs it — and each records its
own spans as the run's facts happen. For those spans to form one tree, each process must
know the run's trace id and the id of the span its spans hang from. Passing a context along
would need a column (a migration, and a read on every path that does not read it today) and
a field in the worker protocol. A hash of the ids every process already holds needs neither:

    trace id     of the run's *trace root*: its workflow run for a workflow's task (so a
                 workflow run's tasks share its trace), else the run itself
    span ids     of the workflow run's span, the run's span and each attempt's span, so a
                 child names its parent without asking who recorded it or whether it has
                 been recorded yet (the run's span is recorded when the run ends)

The same trace id in every process also makes a trace-id ratio sampler decide alike
everywhere, with nothing shared. A collision needs two equal 128-bit hashes: none is feared.
"""

from __future__ import annotations

import hashlib

TRACE_ID_BYTES = 16  # W3C trace context: 128 bits
SPAN_ID_BYTES = 8  # 64 bits

WORKFLOW_RUN = "workflow_run"
RUN = "run"
ATTEMPT = "attempt"


def _hashed(kind: str, object_id: str, size: int) -> int:
    digest = hashlib.blake2b(f"herder:{kind}:{object_id}".encode(), digest_size=size).digest()
    return int.from_bytes(digest, "big") or 1  # all zeros is "no id" in W3C trace context


def trace_root(run_id: str, workflow_run_id: str | None) -> str:
    """The id a run's trace is named by: its workflow run's for a task, else its own."""
    return workflow_run_id or run_id


def trace_id(root_id: str) -> int:
    """The trace of ``root_id`` (a one-off run's id or a workflow run's id)."""
    return _hashed("trace", root_id, TRACE_ID_BYTES)


def span_id(kind: str, object_id: str) -> int:
    """The span of a workflow run (``WORKFLOW_RUN``), a run (``RUN``) or an attempt
    (``ATTEMPT``), by its id."""
    return _hashed(kind, object_id, SPAN_ID_BYTES)


def run_parent(workflow_run_id: str | None) -> tuple[str, str] | None:
    """What a run's span hangs from: its workflow run's span, or nothing (the trace's root)."""
    return None if workflow_run_id is None else (WORKFLOW_RUN, workflow_run_id)
