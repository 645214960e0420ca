"""The worker protocol: every message a worker and the API exchange, one typed shape each,
used by the API's worker routes and by the worker agent alike.

    POST /v1/workers                  RegisterRequest  → RegisterReply (worker_secret, once)
    POST /v1/workers/{id}/heartbeat   Heartbeat        → Directives
    POST /v1/workers/{id}/claim       ClaimRequest     → ClaimReply (assignments + Directives)
    POST /v1/workers/{id}/reports     Report           → ReportResults
    POST /v1/attempts/{id}/logs       AttemptOutput    → ReportResult
    POST /v1/attempts/{id}/complete   AttemptCompletion → ReportResult
    WS   /v1/workers/{id}/stream      StreamWant, StreamReport → StreamAssignments,
                                      StreamResults, StreamProblem (one JSON object a frame)

A completion travels as one shape from the worker to the store: the executor's outcome
becomes a ``Completion`` on the worker, and the API hands that same message on. Where these
messages and the store's records say the same thing, their fields have the same names.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    PrivateAttr,
    field_validator,
    model_validator,
)

from herder.domain.jobs import Capacity
from herder.domain.lifecycle.facts import Ending
from herder.domain.lifecycle.settle import Receipt, Settled
from herder.domain.models import Assignment
from herder.domain.outputs import output_problem
from herder.domain.states import AttemptState, StoppedBy

_STATUS_OF_RECEIPT = {Receipt.APPLIED: 200, Receipt.STALE: 409, Receipt.NOT_YOURS: 404}
MAX_REASON_CHARS = 4096  # longer reasons are cut by the worker, refused by the API


class _Message(BaseModel):
    """A message the API receives: an unknown field is a mistake, not something to ignore."""

    model_config = ConfigDict(extra="forbid")


# --- register -------------------------------------------------------------------------------


class RegisterRequest(_Message):
    """A new worker, sent with the fleet's worker token (its only use)."""

    name: Annotated[str, Field(min_length=1, max_length=255)]
    capacity: Capacity
    max_slots: Annotated[int, Field(ge=1, le=10000)] = 256
    labels: dict[str, str] = {}
    version: str = "unknown"
    address: Annotated[str, Field(max_length=255, description="where gang peers reach it")] = ""


class RegisterReply(BaseModel):
    worker_id: str
    worker_secret: str = Field(
        description="shown once: every later call for this worker sends "
        "'Authorization: Bearer <worker_secret>' (the worker token alone is refused there)"
    )
    heartbeat_interval_seconds: float
    heartbeat_timeout_seconds: float  # silent longer than this, the worker is declared lost
    # The server may answer a report that asks for ``room`` with attempts placed on the
    # worker (a workflow's next task). A server of the release before sends no such field:
    # its worker then never asks, as that server refuses the unknown field.
    hands_over_in_reports: bool = False
    # The server serves ``/v1/workers/{id}/stream``: assignments pushed as they are placed,
    # reports on the same connection. A server of the release before sends no such field.
    streams: bool = False


# --- heartbeat and claim --------------------------------------------------------------------


class HeldAttempt(_Message):
    """An attempt a worker says it holds: the attempt and its number (the fencing token)."""

    attempt_id: str
    attempt: int


class Heartbeat(_Message):
    """ "Alive, and holding these": ``running`` attempts, and ``finished`` ones whose report
    has not been delivered yet (ended, not lost)."""

    running: list[HeldAttempt] = []
    finished: list[HeldAttempt] = []
    # The worker is stopping (SIGTERM): place nothing more on it (alive → draining). Sent
    # only when true, so a server of the release before hears the same heartbeat as ever.
    leaving: bool | None = None


class ClaimRequest(Heartbeat):
    """A long-poll for work that also says what the worker runs (to hear what to stop)."""

    max_runs: Annotated[int, Field(ge=0, le=1000)] = 1
    wait_seconds: Annotated[float, Field(ge=0, le=60)] = 20.0


class Directives(BaseModel):
    """What the server tells a worker to stop, by attempt id."""

    cancel: list[str]  # stop (SIGTERM, grace, SIGKILL) and report them cancelled
    drop: list[str]  # no longer this worker's: kill them, report nothing
    preempt: list[str] = []  # stop like a cancel and report them preempted

    @property
    def stops_any(self) -> bool:
        return bool(self.cancel or self.drop or self.preempt)


class ClaimReply(Directives):
    # Assignments carry secrets' values: an answer that does not validate (say, a server of
    # another version) is reported without them.
    model_config = ConfigDict(hide_input_in_errors=True)

    assignments: list[Assignment]


# --- report ---------------------------------------------------------------------------------


class OutputChunk(_Message):
    """A piece of an attempt's output, its bytes in base64; ``seq`` numbers it per attempt,
    so a resent chunk is stored once."""

    attempt_id: str
    attempt: int
    seq: Annotated[int, Field(ge=0)]
    stream: Annotated[str, Field(pattern="^(stdout|stderr|system)$")]
    data_b64: str
    _data: bytes = PrivateAttr(default=b"")

    @model_validator(mode="after")
    def _decode(self) -> OutputChunk:
        try:
            self._data = base64.b64decode(self.data_b64, validate=True)
        except binascii.Error as error:
            raise ValueError("data_b64 is not valid base64") from error
        return self

    @classmethod
    def of(cls, attempt_id: str, attempt: int, seq: int, stream: str, data: bytes) -> OutputChunk:
        encoded = base64.b64encode(data).decode()
        return cls(attempt_id=attempt_id, attempt=attempt, seq=seq, stream=stream, data_b64=encoded)

    @property
    def data(self) -> bytes:
        """The bytes, decoded once when the message was read."""
        return self._data


class Usage(_Message):
    """What an attempt used (``wait4``; with a cgroup, its peak memory)."""

    cpu_user_seconds: Annotated[float, Field(ge=0)]
    cpu_system_seconds: Annotated[float, Field(ge=0)]
    max_rss_kb: Annotated[int, Field(ge=0)]


class Completion(_Message):
    """How an attempt ended, fenced by its number; with what its job wrote to
    ``$HERDER_OUTPUT`` when it succeeded."""

    attempt_id: str
    attempt: int
    outcome: AttemptState
    exit_code: int | None = None
    reason: Annotated[str, Field(max_length=MAX_REASON_CHARS)] = ""
    usage: Usage | None = None
    output: JsonValue = Field(
        default=None, description="the JSON its job wrote to $HERDER_OUTPUT (at most 64 KiB)"
    )
    stopped_by: StoppedBy | None = Field(
        default=None,
        description="stopped by the worker (timeout, cancel, preemption): it exited within "
        "its stop grace after SIGTERM (sigterm) or needed SIGKILL (sigkill)",
    )
    checkpoint_refused: Annotated[str | None, Field(max_length=MAX_REASON_CHARS)] = Field(
        default=None,
        description="why the checkpoint directory was not saved at the attempt's end (past "
        "checkpoint_mb, unreadable, the upload refused); the run keeps its previous one",
    )

    def ending(self, worker_id: str) -> Ending:
        """This report, as the lifecycle settles it: fenced to ``worker_id``'s attempt. A
        success whose output cannot be kept is a failure (the server checks what any worker
        sends); the output of an attempt that did not succeed is dropped."""
        usage = self.usage
        outcome, reason, output = self.outcome, self.reason, None
        if outcome is AttemptState.SUCCEEDED:
            problem = output_problem(self.output, "the output reported")
            if problem is None:
                output = self.output
            else:
                outcome, reason = AttemptState.FAILED, problem
        return Ending(
            self.attempt_id, self.attempt, outcome, reason, self.exit_code, worker_id,
            usage.cpu_user_seconds if usage else None,
            usage.cpu_system_seconds if usage else None, usage.max_rss_kb if usage else None,
            output, self.stopped_by, self.checkpoint_refused,
        )  # fmt: skip

    @field_validator("outcome")
    @classmethod
    def _finished(cls, outcome: AttemptState) -> AttemptState:
        if outcome is AttemptState.RUNNING:
            raise ValueError("a completion reports how the attempt ended, not 'running'")
        return outcome


class Report(_Message):
    """Output and completions, batched; output is applied first, so an attempt's last words
    land before it ends."""

    logs: list[OutputChunk] = []
    completions: list[Completion] = []
    room: Annotated[
        int | None,
        Field(
            ge=0,
            le=10000,
            description="attempts the worker could start now: the reply may hand over up to "
            "that many placed on it (a workflow's next task, placed in the report's own "
            "transaction); left out by a worker whose server did not say it does so, as a "
            "server of the release before refuses the unknown field",
        ),
    ] = None


class AttemptOutput(_Message):
    """One attempt's output (the batched ``Report`` is the fast path)."""

    worker_id: str
    chunks: list[OutputChunk]


class AttemptCompletion(_Message):
    worker_id: str
    completion: Completion


class ReportResult(BaseModel):
    """Whether one attempt's report was applied."""

    attempt_id: str
    status: int  # 200 applied, 409 refused (not the current attempt), 404 not this worker's
    detail: str

    @classmethod
    def of(cls, settled: Settled) -> ReportResult:
        status = _STATUS_OF_RECEIPT[settled.receipt]
        return cls(attempt_id=settled.attempt_id, status=status, detail=settled.detail)

    @property
    def applied(self) -> bool:
        return self.status == 200


class ReportResults(BaseModel):
    # Assignments carry secrets' values, as a claim's do.
    model_config = ConfigDict(hide_input_in_errors=True)

    results: list[ReportResult]
    assignments: list[Assignment] = []  # handed over: only when the report asked for room


# --- the stream: one WebSocket a worker, instead of claims and report requests ---------------


class StreamWant(Heartbeat):
    """The stream's first frame, and again when the worker starts leaving: push what is
    placed here (up to ``max_runs`` a frame), and what to stop of ``running``."""

    type: Literal["want"]
    max_runs: Annotated[int, Field(ge=0, le=1000)] = 1


class StreamReport(_Message):
    """A report on the stream; the server answers ``StreamResults`` with the same ``seq`` (or
    ``StreamProblem`` when it could not apply it now)."""

    type: Literal["report"]
    seq: Annotated[int, Field(ge=0)]
    report: Report


WorkerFrame = Annotated[StreamWant | StreamReport, Field(discriminator="type")]


class StreamAssignments(ClaimReply):
    """Attempts placed on the worker, and what to stop, as a claim would answer."""

    type: Literal["assignments"] = "assignments"


class StreamResults(ReportResults):
    type: Literal["results"] = "results"
    seq: int


class StreamProblem(BaseModel):
    """A frame the server refused (422: the field named), or a report it could not apply now
    (503: send it again); ``seq`` is the report's, None for another frame."""

    type: Literal["problem"] = "problem"
    seq: int | None = None
    status: int
    detail: str


ServerFrame = Annotated[
    StreamAssignments | StreamResults | StreamProblem, Field(discriminator="type")
]
