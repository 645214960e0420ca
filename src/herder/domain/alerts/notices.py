"""A job's notices: the defaults a person subscribes to without building rules
(``herder job notify``, ``PUT /v1/jobs/{id}/notices``), and the notice a run stopped at the
24-hour limit sends its job's owner with no rule at all.

A subscription is the caller's own (its ``subscriber`` is ``Principal.actor``) and is made of
the alert machinery's parts: a channel (its own, to the address given, or a channel of the
tenant's named in ``to``) and one rule of an existing kind per event, scoped to the job. Both
are marked as the subscription's (``managed_by``), so they are listed among the tenant's
channels and rules, grouped and paced like any other, and changed only through it.
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from herder.domain.alerts.addresses import MAX_URL_LENGTH, ChannelKind, checked_address
from herder.domain.alerts.rules import FailedOutcome, RuleKind
from herder.domain.jobs import MAX_TIMEOUT_SECONDS
from herder.domain.models import _Record

OWNER = "owner"  # ``managed_by`` of the channels the 24-hour notices go to
NOTICE_PREFIX = "jnt"
_CHANNEL_NAME = re.compile(r"^[A-Za-z0-9][\w.\-]{0,127}$")


class NoticeEvent(StrEnum):
    FAILED = "failed"  # a run ended failed, or dead after its last retry
    TIMED_OUT = "timed_out"
    DEADLINE_MISSED = "deadline_missed"
    APPROVAL = "approval"  # an approval task of a workflow that runs the job waits


def rule_of(event: NoticeEvent, job_id: str) -> tuple[RuleKind, dict[str, JsonValue]]:
    """The rule (kind, params) that tells a subscriber of ``event`` about the job."""
    match event:
        case NoticeEvent.FAILED:
            outcomes = [FailedOutcome.FAILED.value, FailedOutcome.DEAD.value]
            return RuleKind.RUN_FAILED, {"job_id": job_id, "outcomes": list(outcomes)}
        case NoticeEvent.TIMED_OUT:
            return RuleKind.RUN_FAILED, {"job_id": job_id, "outcomes": ["timed_out"]}
        case NoticeEvent.DEADLINE_MISSED:
            return RuleKind.DEADLINE_MISSED, {"job_id": job_id}
        case NoticeEvent.APPROVAL:
            return RuleKind.APPROVAL_WAITING, {"job_id": job_id}


class NoticeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    on: list[NoticeEvent] = Field(
        min_length=1, max_length=len(NoticeEvent), description="what to be told of"
    )
    to: Annotated[str, Field(min_length=1, max_length=MAX_URL_LENGTH)] | None = Field(
        default=None,
        description="mailto:someone@example.com, a Slack incoming webhook's URL, or the name "
        "of one of the tenant's alert channels; none: the signed-in person's email",
    )


class JobNotice(_Record):
    id: str
    job_id: str
    subscriber: str = Field(description="who is told: user:usr_… or user:key_…")
    on: list[NoticeEvent]
    to: str = Field(description="the address (a Slack URL masked) or the channel's name")
    channel_id: str
    rule_ids: list[str] = Field(description="the alert rules it is made of (managed_by it)")
    created_at: datetime
    updated_at: datetime


class Target(BaseModel):
    """Where a subscription sends: a new channel of ``kind`` to ``url``, or a named one."""

    model_config = ConfigDict(frozen=True)

    kind: ChannelKind | None  # None: ``channel`` names one of the tenant's
    url: str = ""
    channel: str = ""


def target_of(to: str) -> Target:
    """``to`` as a target, or ``ValueError`` saying what is wrong: an address with ``@`` (or
    ``mailto:``) is one email recipient, an ``http(s)`` URL a Slack incoming webhook, anything
    else a channel's name."""
    text = to.strip()
    if "@" in text or text.lower().startswith("mailto:"):
        url = checked_address(ChannelKind.EMAIL, text)
        if "," in url:
            raise ValueError("names several recipients: a notice goes to one address")
        return Target(kind=ChannelKind.EMAIL, url=url)
    if "://" in text:
        return Target(kind=ChannelKind.SLACK, url=checked_address(ChannelKind.SLACK, text))
    if not _CHANNEL_NAME.fullmatch(text):
        raise ValueError(
            "is neither mailto:someone@example.com, a Slack webhook's https URL, "
            "nor an alert channel's name"
        )
    return Target(kind=None, channel=text)


def at_the_limit(timeout_seconds: object) -> bool:
    """Whether a run that timed out ran under the system's maximum (24 h): its own timeout
    is that maximum (``timeout_seconds`` of the spec it ran with)."""
    return isinstance(timeout_seconds, int) and timeout_seconds >= MAX_TIMEOUT_SECONDS


def limit_notice(
    tenant_id: str, run_id: str, job_id: str, job_name: str, attempt: int, now: datetime
) -> dict[str, Any]:
    """The payload of the owner's notice, shaped as an incident's so that email and Slack
    tell it as they tell any other (``messages.notice``), linking to the run."""
    summary = f"run {run_id} of job {job_name} was stopped at the 24-hour limit (attempt {attempt})"
    incident = {
        "id": None, "key": job_id, "state": "open", "summary": summary,
        "details": {"run_ids": [run_id], "state": "timed_out"},
        "opened_at": now.isoformat(), "resolved_at": None,
    }  # fmt: skip
    rule = {"id": None, "name": "24-hour limit", "kind": "max_timeout"}
    return {"event": "opened", "tenant_id": tenant_id, "rule": rule, "incident": incident}
