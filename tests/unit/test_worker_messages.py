"""The worker protocol's messages: what each accepts, and a completion's one shape from the
executor's outcome to the wire."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from herder.domain.jobs import JobSpec, Runtime
from herder.domain.models import Assignment
from herder.domain.states import AttemptState, StoppedBy
from herder.protocol import MAX_REASON_CHARS, Completion, OutputChunk, Report
from herder.worker.attempts import LiveAttempt
from herder.worker.outcome import Outcome, ResourceUsage


def test_output_travels_as_base64_and_is_read_as_bytes() -> None:
    chunk = OutputChunk.of("att_1", 2, 0, "stdout", b"\x00hello\xff")
    assert chunk.data_b64 == "AGhlbGxv/w=="
    wire = Report(logs=[chunk]).model_dump_json()
    (read,) = Report.model_validate_json(wire).logs
    assert read.data == b"\x00hello\xff"
    assert (read.attempt_id, read.attempt, read.seq, read.stream) == ("att_1", 2, 0, "stdout")


@pytest.mark.parametrize(
    "change",
    [
        {"data_b64": "not base64!"},
        {"stream": "stdin"},
        {"seq": -1},
        {"extra": 1},
    ],
)
def test_output_chunks_that_are_refused(change: dict[str, object]) -> None:
    body = {"attempt_id": "a", "attempt": 1, "seq": 0, "stream": "stdout", "data_b64": ""}
    with pytest.raises(ValidationError):
        OutputChunk.model_validate({**body, **change})


@pytest.mark.parametrize(
    "change",
    [
        {"outcome": "running"},
        {"reason": "x" * (MAX_REASON_CHARS + 1)},
        {"usage": {"cpu_user_seconds": -1, "cpu_system_seconds": 0, "max_rss_kb": 0}},
    ],
)
def test_completions_that_are_refused(change: dict[str, object]) -> None:
    body = {"attempt_id": "a", "attempt": 1, "outcome": "succeeded"}
    Completion.model_validate(body)
    with pytest.raises(ValidationError):
        Completion.model_validate({**body, **change})


def live_attempt() -> LiveAttempt:
    assignment = Assignment(
        attempt_id="att_1",
        attempt=3,
        run_id="run_1",
        tenant_id="ten_1",
        idempotency_key=None,
        spec=JobSpec(runtime=Runtime.SHELL, command="true"),
    )
    return LiveAttempt(assignment, "wrk_1")


def test_an_outcome_becomes_a_completion() -> None:
    usage = ResourceUsage(0.5, 0.25, 2048, 9.0)
    outcome = Outcome(AttemptState.FAILED, 3, "exit 3", usage)
    completion = live_attempt().completion(outcome)
    assert completion.model_dump(mode="json") == {
        "attempt_id": "att_1",
        "attempt": 3,
        "outcome": "failed",
        "exit_code": 3,
        "reason": "exit 3",
        "usage": {"cpu_user_seconds": 0.5, "cpu_system_seconds": 0.25, "max_rss_kb": 2048},
        "output": None,
        "stopped_by": None,
        "checkpoint_refused": None,
    }


def test_how_a_stopped_attempt_ended_reaches_its_completion_and_its_ending() -> None:
    usage = ResourceUsage(0.0, 0.0, 0, 2.0)
    stopped = Outcome(
        AttemptState.CANCELLED, None, "cancelled", usage, stopped_by=StoppedBy.SIGKILL
    )
    completion = live_attempt().completion(stopped)
    assert completion.stopped_by is StoppedBy.SIGKILL
    assert completion.ending("wrk_1").stopped_by is StoppedBy.SIGKILL


def test_a_lost_attempt_says_why_and_a_long_reason_is_cut() -> None:
    usage = ResourceUsage(0.0, 0.0, 0, 0.0)
    attempt = live_attempt()
    long = attempt.completion(Outcome(AttemptState.FAILED, None, "y" * 10_000, usage))
    assert long.reason == "y" * MAX_REASON_CHARS
    attempt.lose("the worker stopped while the attempt ran")
    assert attempt.stop.is_set()
    lost = attempt.completion(Outcome(AttemptState.CANCELLED, None, "cancelled", usage))
    assert (lost.outcome, lost.reason) == ("lost", "the worker stopped while the attempt ran")
