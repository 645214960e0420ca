"""Triggers: which events start which work, with which parameters (docs/events.md).

A trigger names an event (exactly), an optional filter over the event (``domain.
event_filters``), and a job or a workflow of its tenant to start, its parameters read from
the event. ``plan`` decides, purely, what each of an event's triggers does; the store starts
the runs in the transaction that records the event.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache, partial
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from herder.domain.errors import Invalid
from herder.domain.event_filters import (
    MAX_EVENT_STEPS,
    MAX_FILTER_STEPS,
    Budget,
    FilterError,
    Node,
    OverBudget,
    check_cost,
    matches,
    parse,
    parse_value,
    value,
    within_share,
)
from herder.domain.events import EventName
from herder.domain.filter_fields import FilterSource
from herder.domain.models import _Record

MAX_TRIGGER_PARAMS = 32
MAX_TRIGGERS_PER_EVENT = 20  # a tenant's enabled triggers on one event name
TriggerName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9_.\-]*$")]
TargetName = Annotated[str, Field(min_length=1, max_length=128)]
ParamName = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]


class TriggerSpec(BaseModel):
    """What a trigger does; its name is its own field, as a limit's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    event: EventName
    filter: FilterSource | None = None
    job: TargetName | None = Field(default=None, description="the job to start (by name)")
    workflow: TargetName | None = Field(
        default=None, description="or the workflow to start (by name)"
    )
    params: dict[ParamName, Annotated[str, Field(max_length=512)]] = Field(
        default_factory=dict,
        max_length=MAX_TRIGGER_PARAMS,
        description="each parameter's value: a path into the event (payload.ref) or a literal",
    )
    enabled: bool = True

    @field_validator("filter")
    @classmethod
    def _filter_cost(cls, source: str | None) -> str | None:
        """Bounded when saved (not when a stored one is read: one saved before the bound
        still loads, and its budget holds it at every event)."""
        if source is not None:
            try:
                check_cost(parse(source))
            except FilterError as error:
                raise ValueError(str(error)) from None
        return source

    @field_validator("params")
    @classmethod
    def _params_parse(cls, params: dict[str, str]) -> dict[str, str]:
        for name, source in params.items():
            try:
                parse_value(source)
            except FilterError as error:
                raise ValueError(f"{name}: {error}") from None
        return params

    @model_validator(mode="after")
    def _one_target(self) -> TriggerSpec:
        if (self.job is None) == (self.workflow is None):
            raise ValueError("give exactly one of job and workflow")
        return self


class TriggerRequest(TriggerSpec):
    name: TriggerName


class Trigger(_Record):
    id: str
    name: str
    event: str
    filter: str | None
    job: str | None
    workflow: str | None
    params: dict[str, str]
    enabled: bool
    created_at: datetime
    updated_at: datetime
    version: int


def check_declared(spec: TriggerSpec, declared: Collection[str]) -> None:
    """``Invalid`` naming the first of the trigger's parameters its job or workflow does not
    declare: its start would be refused at every event."""
    kind = "job" if spec.job is not None else "workflow"
    for name in spec.params:
        if name not in declared:
            names = ", ".join(sorted(declared)[:50]) or "none"
            raise Invalid(
                f"{name!r} is not a parameter of {kind} {spec.job or spec.workflow} "
                f"(it declares: {names})",
                field=f"params.{name}",
            )


@dataclass(frozen=True)
class Start:
    """A matching trigger's start: of ``job`` or ``workflow`` (by name), with ``params``."""

    trigger: Trigger
    params: Mapping[str, Any]


@dataclass(frozen=True)
class Refused:
    """A matching trigger that cannot start: why, as the event records it."""

    trigger: Trigger
    error: str


def plan(
    triggers: Sequence[Trigger], event: Mapping[str, Any], budget: Budget
) -> list[Start | Refused]:
    """For each enabled trigger whose filter the event (``domain.events.document``)
    satisfies, its start, or why its parameters cannot be read; the others say nothing.
    Each trigger's filter and parameters take at most ``MAX_FILTER_STEPS`` of ``budget``: a
    trigger they cannot be read within is refused, saying so."""
    decided: list[Start | Refused] = []
    for trigger in triggers:
        if not trigger.enabled:
            continue
        short = budget.left < MAX_FILTER_STEPS
        found = within_share(budget, partial(_read, trigger, event))
        if isinstance(found, OverBudget):
            decided.append(Refused(trigger, _over_budget(short)))
        elif found is not None:
            decided.append(found)
    return decided


def _read(trigger: Trigger, event: Mapping[str, Any], budget: Budget) -> Start | Refused | None:
    """The trigger's start or refusal, or None when its filter does not match."""
    if trigger.filter is not None and not matches(_parsed(trigger.filter), event, budget):
        return None
    params: dict[str, Any] = {}
    missing = []
    for name, source in trigger.params.items():
        found = value(parse_value(source), event, budget)
        if found is None:
            missing.append(f"params.{name}: {source} is not in the event")
        params[name] = found
    return Refused(trigger, "; ".join(missing)) if missing else Start(trigger, params)


def _over_budget(short: bool) -> str:
    if short:
        return (
            "not evaluated: the event's earlier triggers took its budget of "
            f"{MAX_EVENT_STEPS:,} steps (docs/events.md#what-an-event-may-cost)"
        )
    return (
        f"filter: takes more than {MAX_FILTER_STEPS:,} steps on this event's payload "
        "(docs/events.md#what-an-event-may-cost)"
    )


# A filter is parsed once a process, not once an event (its tree is immutable).
_parsed: Callable[[str], Node] = lru_cache(maxsize=4096)(parse)
