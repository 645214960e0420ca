"""Alert channels and rules as the API takes and shows them, and the incidents and
deliveries they make.

A rule's ``params`` hold what its kind needs and nothing else: a field another kind uses is
refused by name, so a typo cannot silently widen a rule.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationInfo, field_validator

from herder.domain.alerts.addresses import ChannelAddress, ChannelKind, checked_address
from herder.domain.budgets import ALERT_FRACTION
from herder.domain.models import _Record

MAX_CONSECUTIVE = 100
MAX_CHANNELS_PER_RULE = 10
Name = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][\w.\-]*$")]


class RuleKind(StrEnum):
    RUN_FAILED = "run_failed"
    SCHEDULE_MISSED = "schedule_missed"
    WORKFLOW_FAILED = "workflow_failed"
    QUEUE_WAIT_P99 = "queue_wait_p99"
    NO_CAPACITY = "no_capacity"
    LOOP_STALE = "loop_stale"
    BUDGET = "budget"
    DEADLINE_MISSED = "deadline_missed"
    RUNNING_LONG = "running_long"
    APPROVAL_WAITING = "approval_waiting"


class FailedOutcome(StrEnum):
    FAILED = "failed"
    DEAD = "dead"
    TIMED_OUT = "timed_out"


# Which params each kind reads; any other param given is refused.
PARAMS_OF_KIND: dict[RuleKind, frozenset[str]] = {
    RuleKind.RUN_FAILED: frozenset({"job_id", "consecutive", "outcomes"}),
    RuleKind.SCHEDULE_MISSED: frozenset({"schedule_id"}),
    RuleKind.WORKFLOW_FAILED: frozenset({"workflow_id"}),
    RuleKind.QUEUE_WAIT_P99: frozenset({"threshold_seconds", "window_seconds"}),
    RuleKind.NO_CAPACITY: frozenset({"wait_seconds"}),
    RuleKind.LOOP_STALE: frozenset({"loop", "stale_seconds"}),
    RuleKind.BUDGET: frozenset({"fraction"}),
    RuleKind.DEADLINE_MISSED: frozenset({"job_id", "workflow_id", "schedule_id"}),
    RuleKind.RUNNING_LONG: frozenset({"job_id", "factor", "min_seconds"}),
    RuleKind.APPROVAL_WAITING: frozenset({"workflow_id", "job_id", "after_seconds"}),
}
REQUIRED_PARAMS: dict[RuleKind, frozenset[str]] = {
    RuleKind.QUEUE_WAIT_P99: frozenset({"threshold_seconds"}),
}


class RuleParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    job_id: str | None = Field(
        default=None, max_length=40,
        description="run_failed, deadline_missed, running_long: only this job's runs; "
        "approval_waiting: only approvals of workflow runs that run this job",
    )  # fmt: skip
    consecutive: Annotated[int, Field(ge=1, le=MAX_CONSECUTIVE)] = Field(
        default=1, description="run_failed: open after this many ended runs of a job all failed"
    )
    outcomes: list[FailedOutcome] = Field(
        default_factory=lambda: list(FailedOutcome), min_length=1, max_length=3,
        description="run_failed: which ends count as failures",
    )  # fmt: skip
    schedule_id: str | None = Field(
        default=None, max_length=40,
        description="schedule_missed, deadline_missed: only this schedule's (runs)",
    )  # fmt: skip
    workflow_id: str | None = Field(
        default=None, max_length=40,
        description="workflow_failed, deadline_missed: only this workflow's runs",
    )  # fmt: skip
    threshold_seconds: Annotated[float, Field(gt=0, le=7 * 86400)] | None = Field(
        default=None, description="queue_wait_p99: open when the p99 wait is above this"
    )
    window_seconds: Annotated[float, Field(ge=60, le=86400)] = Field(
        default=900, description="queue_wait_p99: over runs started in this window"
    )
    after_seconds: Annotated[float, Field(ge=0, le=30 * 86400)] = Field(
        default=0,
        description="approval_waiting: once an approval task has waited this long (0: at once)",
    )
    wait_seconds: Annotated[float, Field(ge=60, le=86400)] = Field(
        default=300, description="no_capacity: runs waiting for room this long"
    )
    loop: str | None = Field(default=None, max_length=128, description="loop_stale: one loop")
    stale_seconds: Annotated[float, Field(ge=10, le=86400)] = Field(
        default=60, description="loop_stale: a lease expired this long ago"
    )
    factor: Annotated[float, Field(gt=1, le=100)] = Field(
        default=2.0,
        description="running_long: open when a run's attempt has run this many times the p95 "
        "of its job's last 50 successful runs (judged from 5 of them)",
    )
    min_seconds: Annotated[float, Field(ge=0, le=7 * 86400)] = Field(
        default=60, description="running_long: and for longer than this"
    )
    fraction: Annotated[float, Field(gt=0, lt=1)] = Field(
        default=ALERT_FRACTION,
        description="budget: warn when this share of a budget is used (and again when spent)",
    )

    def check_for(self, kind: RuleKind) -> list[tuple[str, str]]:
        """(field, message) for each param the kind does not use, or needs and lacks."""
        given = self.model_fields_set
        unused = sorted(given - PARAMS_OF_KIND[kind])
        missing = sorted(REQUIRED_PARAMS.get(kind, frozenset()) - given)
        return [(f"params.{name}", f"not a parameter of rule kind {kind}") for name in unused] + [
            (f"params.{name}", f"required by rule kind {kind}") for name in missing
        ]

    def shown(self, kind: RuleKind) -> dict[str, Any]:
        """Only the params the kind reads (defaults included), as JSON."""
        values = self.model_dump(mode="json")
        return {name: values[name] for name in sorted(PARAMS_OF_KIND[kind])}


class ChannelRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name
    kind: ChannelKind = ChannelKind.WEBHOOK
    url: ChannelAddress
    enabled: bool = True

    @field_validator("url")
    @classmethod
    def _address_of_its_kind(cls, url: str, info: ValidationInfo) -> str:
        kind = info.data.get("kind")
        return url if kind is None else checked_address(kind, url)  # None: kind was refused


class ChannelChanges(BaseModel):
    """A new ``url`` is checked against the channel's kind where the channel is read."""

    model_config = ConfigDict(extra="forbid")

    name: Name | None = None
    url: ChannelAddress | None = None
    enabled: bool | None = None


class Channel(_Record):
    id: str
    name: str
    kind: str
    url: str = Field(description="where it sends; a Slack URL masked (its token is kept sealed)")
    enabled: bool
    created_at: datetime
    updated_at: datetime
    managed_by: str | None = Field(
        default=None,
        description="the job notice (jnt_…) it is part of, changed only through it; "
        "'owner': where the 24-hour limit's notices reach a job's owner",
    )


class CreatedChannel(Channel):
    secret: str | None = Field(
        description="a webhook's HMAC key of its signatures, shown this once only; "
        "null for email and Slack"
    )


class RuleRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name
    kind: RuleKind
    params: RuleParams = RuleParams()
    channel_ids: list[Annotated[str, Field(max_length=40)]] = Field(
        min_length=1, max_length=MAX_CHANNELS_PER_RULE
    )
    enabled: bool = True
    notify_recovery: bool = Field(default=True, description="a notice when an incident resolves")


class RuleChanges(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name | None = None
    params: RuleParams | None = None
    channel_ids: list[Annotated[str, Field(max_length=40)]] | None = Field(
        default=None, min_length=1, max_length=MAX_CHANNELS_PER_RULE
    )
    enabled: bool | None = None
    notify_recovery: bool | None = None


class Rule(_Record):
    id: str
    name: str
    kind: RuleKind
    params: dict[str, JsonValue]
    channel_ids: list[str]
    enabled: bool
    notify_recovery: bool
    created_at: datetime
    updated_at: datetime
    managed_by: str | None = Field(
        default=None, description="the job notice (jnt_…) it is part of, changed only through it"
    )


class IncidentState(StrEnum):
    OPEN = "open"
    RESOLVED = "resolved"


class Incident(_Record):
    id: str
    rule_id: str
    key: str = Field(description="what is alerting: a job, schedule, workflow, loop id, …")
    state: IncidentState
    summary: str
    details: dict[str, JsonValue]
    opened_at: datetime
    last_seen_at: datetime
    resolved_at: datetime | None
    resolution: str | None = Field(
        default=None,
        description="what resolved it: its recovery, or 'rule disabled' / 'rule deleted'",
    )


class DeliveryState(StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"  # every attempt failed


class DeliveryAttempt(_Record):
    at: datetime
    status: int | None  # the receiver's HTTP status (SMTP reply code for email); None: none came
    error: str | None
    message_id: str | None = Field(
        default=None, description="email and Slack: the message that carried this delivery"
    )
    message_deliveries: int | None = Field(
        default=None, description="email and Slack: how many deliveries that message carried"
    )


class Delivery(_Record):
    id: str
    channel_id: str
    incident_id: str | None  # None for a channel's test
    event: str = Field(description="opened, resolved or test")
    state: DeliveryState
    attempts: int
    next_attempt_at: datetime | None
    last_status: int | None
    last_error: str | None
    history: list[DeliveryAttempt]
    payload: dict[str, JsonValue]
    created_at: datetime
    delivered_at: datetime | None
