"""Workflow tasks that wait instead of running (docs/events.md#waiting): ``wait`` — for a
duration, until an instant, or until an event that matches a filter — and ``approval`` —
until an operator approves or rejects. Their run is ``waiting``: it holds no worker, no
quota and no queue place, and survives restarts (it is a row; the starter wakes it at its
``run_at``, an event or a person's decision ends it).

How one ends, decided here: a timed wait succeeds at its time; an event wait succeeds with
the event as its output; an approval succeeds when approved and fails when rejected, its
output the decision (so ``all_success`` goes on only on approval and ``one_failed`` or
``all_failed`` branch on a rejection); a timeout does what ``on_timeout`` says.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from datetime import datetime, timedelta
from enum import StrEnum
from functools import lru_cache
from typing import Annotated, Any, assert_never

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from herder.domain.event_filters import Budget, matches, parse
from herder.domain.events import EventName
from herder.domain.filter_fields import FilterSource
from herder.domain.lifecycle.changes import RunMove, transition
from herder.domain.outputs import MAX_OUTPUT_BYTES
from herder.domain.states import RunState
from herder.domain.templates import PLACEHOLDER, fill

MAX_WAIT_SECONDS = 366 * 86_400
WAITER = "waiter"  # the actor of a wait's end by time
WaitSeconds = Annotated[int, Field(ge=1, le=MAX_WAIT_SECONDS)]


class WaitTimeout(StrEnum):
    FAIL = "fail"  # the task ends timed_out (a failure to its dependants)
    SUCCEED = "succeed"
    SKIP = "skip"


class ApprovalTimeout(StrEnum):
    REJECT = "reject"  # as a rejection: failed
    APPROVE = "approve"
    SKIP = "skip"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EventWait(_Strict):
    name: EventName
    filter: FilterSource | None = None


class WaitSpec(_Strict):
    """Exactly one of ``seconds``, ``until`` and ``event``."""

    seconds: WaitSeconds | None = Field(default=None, description="wait this long")
    until: str | None = Field(
        default=None,
        max_length=160,
        description="an instant with its offset, or params.NAME holding one",
    )
    event: EventWait | None = Field(default=None, description="wait for a matching event")
    timeout_seconds: WaitSeconds | None = Field(
        default=None, description="an event wait gives up after this long"
    )
    on_timeout: WaitTimeout = WaitTimeout.FAIL

    @model_validator(mode="after")
    def _one_kind(self) -> WaitSpec:
        given = [name for name in ("seconds", "until", "event") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of seconds, until and event")
        if self.timeout_seconds is not None and self.event is None:
            raise ValueError("timeout_seconds bounds an event wait; a timed wait has its time")
        if self.until is not None and not self.until.startswith("params."):
            _instant(self.until)
        return self


class ApprovalSpec(_Strict):
    message: str | None = Field(
        default=None,
        max_length=1000,
        description="shown to approvers, each {params.NAME} filled with the run's value",
    )
    timeout_seconds: WaitSeconds | None = None
    on_timeout: ApprovalTimeout = ApprovalTimeout.REJECT


def check_message(approval: ApprovalSpec, declared: Collection[str]) -> None:
    """``ValueError`` for a message whose braces hold anything but ``{params.NAME}`` of a
    parameter the workflow declares: every run has a value for each of those."""
    text = approval.message or ""
    listed = ", ".join(sorted(declared)) or "none"
    rule = f"a message shows a parameter as {{params.NAME}} (declared: {listed})"
    for match in PLACEHOLDER.finditer(text):
        source, _, name = match.group(1).partition(".")
        if source != "params" or name not in declared:
            raise ValueError(f"{match.group(0)[:64]!r} names no parameter: {rule}")
    if "{" in PLACEHOLDER.sub("", text) or "}" in PLACEHOLDER.sub("", text):
        raise ValueError(f"a brace is left open: {rule}")


def approval_message(approval: ApprovalSpec, params: Mapping[str, JsonValue]) -> str | None:
    """What the approvers read: the message with each ``{params.NAME}`` filled with the
    run's value (a string as it is, anything else as JSON). The run's parameters never
    change, so it reads the same whenever it is shown; a placeholder with no value (a
    definition stored before messages were checked) shows as written."""
    if approval.message is None:
        return None
    return fill(approval.message, {"params": params}, lambda named: f"{{{named}}}")


def _instant(text: str) -> datetime:
    """An ISO 8601 instant with its offset, or ``ValueError``."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{text[:64]!r} is not an instant such as 2026-12-01T07:00:00+01:00"
        ) from None
    if moment.tzinfo is None:
        raise ValueError(f"{text[:64]!r} has no offset: say which zone (Z, +01:00…)")
    return moment


def wake_at(
    wait: WaitSpec | ApprovalSpec, params: dict[str, Any], now: datetime
) -> datetime | None:
    """When the starter looks at the waiting run again: its time, its timeout, or never
    (``None``: only an event or a person ends it). ``ValueError`` for an ``until`` whose
    parameter holds no instant."""
    if isinstance(wait, ApprovalSpec):
        return (
            None if wait.timeout_seconds is None else now + timedelta(seconds=wait.timeout_seconds)
        )
    if wait.seconds is not None:
        return now + timedelta(seconds=wait.seconds)
    until = until_instant(wait, params)
    if until is not None:
        return until
    return None if wait.timeout_seconds is None else now + timedelta(seconds=wait.timeout_seconds)


def until_instant(wait: WaitSpec, params: dict[str, Any]) -> datetime | None:
    """A wait's ``until`` as an instant (a parameter's value, where it names one);
    ``ValueError`` for a value that is none."""
    if wait.until is None:
        return None
    source = wait.until
    if source.startswith("params."):
        value = params.get(source.removeprefix("params."))
        if not isinstance(value, str):
            raise ValueError(f"{source} holds no instant")
        source = value
    return _instant(source)


def on_time(run_id: str, wait: WaitSpec | ApprovalSpec, now: datetime) -> RunMove:
    """The run's time came: a timed wait is over; an event wait or approval timed out."""
    if isinstance(wait, WaitSpec) and wait.event is None:
        return _end(run_id, RunState.SUCCEEDED, now, WAITER, "waited: its time came")
    seconds = wait.timeout_seconds
    if isinstance(wait, ApprovalSpec):
        why = f"no decision within {seconds} s"
        output: dict[str, Any] | None
        match wait.on_timeout:
            case ApprovalTimeout.APPROVE:
                target, output = RunState.SUCCEEDED, _decision("approved", WAITER, why, now)
            case ApprovalTimeout.REJECT:
                target, output = RunState.FAILED, _decision("rejected", WAITER, why, now)
            case ApprovalTimeout.SKIP:
                target, output = RunState.SKIPPED, None
            case unknown:
                assert_never(unknown)
        return _end(run_id, target, now, WAITER, f"timed out: {why} ({wait.on_timeout})", output)
    name = wait.event.name if wait.event is not None else "?"
    why = f"no event {name} within {seconds} s"
    target = {
        WaitTimeout.FAIL: RunState.TIMED_OUT,
        WaitTimeout.SUCCEED: RunState.SUCCEEDED,
        WaitTimeout.SKIP: RunState.SKIPPED,
    }[wait.on_timeout]
    return _end(run_id, target, now, WAITER, f"timed out: {why} ({wait.on_timeout})")


def decided(
    run_id: str, *, approved: bool, actor: str, comment: str | None, now: datetime
) -> RunMove:
    """A person's decision on an approval: approved succeeds, rejected fails."""
    word = "approved" if approved else "rejected"
    message = f"{word} by {actor}" + (f": {comment}" if comment else "")
    return _end(
        run_id, RunState.SUCCEEDED if approved else RunState.FAILED, now, actor, message,
        _decision(word, actor, comment, now),
    )  # fmt: skip


def is_awaited(filter_source: str | None, document: dict[str, Any], budget: Budget) -> bool:
    """Whether an event (its ``document``) ends a wait for its name with this filter
    (``None``: any); ``OverBudget`` when finding out takes more than ``budget``."""
    return filter_source is None or matches(_parsed(filter_source), document, budget)


_parsed = lru_cache(maxsize=4096)(parse)  # a filter is parsed once a process


def event_output(event_id: str, name: str, payload: Any) -> dict[str, Any]:
    """What an event wait it ends gives as its output: the event (its payload left out when
    it is larger than an output may be) — made once an event, for every wait it ends."""
    output: dict[str, Any] = {"event_id": event_id, "name": name, "payload": payload}
    if len(json.dumps(output)) > MAX_OUTPUT_BYTES:
        output = {"event_id": event_id, "name": name, "payload_omitted": True}
    return output


def arrived(run_id: str, output: dict[str, Any], now: datetime) -> RunMove:
    """The awaited event came: the wait succeeds with the event (``event_output``) as its
    output."""
    event_id, name = output["event_id"], output["name"]
    return _end(
        run_id, RunState.SUCCEEDED, now, f"event:{event_id}", f"event {name} arrived", output
    )


def _decision(word: str, actor: str, comment: str | None, now: datetime) -> dict[str, Any]:
    return {"decision": word, "by": actor, "comment": comment, "decided_at": now.isoformat()}


def _end(
    run_id: str,
    target: RunState,
    now: datetime,
    actor: str,
    message: str,
    output: Any = None,
) -> RunMove:
    values: dict[str, Any] = {"reason": None if target is RunState.SUCCEEDED else message}
    if output is not None:
        values["output"] = output
    return transition(run_id, RunState.WAITING, target, now, actor=actor, message=message, **values)
