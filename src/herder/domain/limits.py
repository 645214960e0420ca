"""Flow control by key (docs/flow-control.md): a tenant's named limits, and the references to
them that jobs, workflow tasks and schedules carry.

A **limit** bounds runs that share a **key**: at most ``max_running`` at once, and (with a
``rate``) at most ``rate.count`` starts per ``rate.period_seconds``, per key. A job, task or
schedule names a limit with a **key template** (``{params.account}``, ``{env.ACCOUNT_ID}``,
literal text around them) that a run's submit renders into its key; one limit is shared by
every job and workflow of its tenant that names it. ``strategy`` says what a submission to a
full key does: ``queue`` waits its turn (the dispatcher serves keys round-robin),
``cancel_newest`` records the new run cancelled, ``cancel_in_progress`` cancels the key's
older active runs for it, ``drop`` creates no run (409). A limit that ``debounce``s collapses
the key's submissions within the window into one run, started when the window closes (or
after ``max_wait_seconds``), with the first or last submission's values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator

from herder.domain import templates
from herder.domain.errors import Invalid
from herder.domain.labels import check_pool_reference

MAX_LIMIT_REFERENCES = 4  # limits one job, task or schedule names
MAX_KEY_CHARS = 128  # a rendered key
MAX_TEMPLATE_CHARS = 256
MAX_RUNNING_PER_KEY = 100_000
MAX_RATE_COUNT = 1_000_000
MAX_RATE_PERIOD_SECONDS = 31 * 86_400
MAX_DEBOUNCE_SECONDS = 86_400


class LimitStrategy(StrEnum):
    QUEUE = "queue"
    CANCEL_NEWEST = "cancel_newest"
    CANCEL_IN_PROGRESS = "cancel_in_progress"
    DROP = "drop"


class DebounceKeep(StrEnum):
    FIRST = "first"
    LAST = "last"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Rate(_Strict):
    """At most ``count`` starts per key in any ``period_seconds``."""

    count: Annotated[int, Field(ge=1, le=MAX_RATE_COUNT)]
    period_seconds: Annotated[int, Field(ge=1, le=MAX_RATE_PERIOD_SECONDS)]


class Debounce(_Strict):
    window_seconds: Annotated[int, Field(ge=1, le=MAX_DEBOUNCE_SECONDS)]
    keep: DebounceKeep = DebounceKeep.LAST
    max_wait_seconds: Annotated[int | None, Field(ge=1, le=MAX_DEBOUNCE_SECONDS)] = None


def placeholders(template: str) -> list[tuple[str, str]]:
    """The ``(source, name)`` of each placeholder of ``template``, in order; ``ValueError``
    for anything else in braces, a brace left open, or a character that is not printable
    (``unprintable``). A template reads only the run's own parameters and environment: no
    other object, no tenant's."""
    if (character := unprintable(template)) is not None:
        raise ValueError(f"a key template has {character}, {UNPRINTABLE}")
    return templates.placeholders(template)


UNPRINTABLE = "a control, format or separator character: a key is printable text"


def unprintable(text: str) -> str | None:
    """The first character of ``text`` that is not printable, as ``U+XXXX`` (None: there is
    none). Python's ``str.isprintable``: every control (C0, DEL, C1 such as U+0085), format
    (U+200B, the U+202E right-to-left override), line or paragraph separator (U+2028),
    surrogate, private-use or unassigned character, and every space but the ASCII space.
    Each hides, reorders or breaks what a key shows in reasons, listings and metrics."""
    if text.isprintable():
        return None
    return next(f"U+{ord(one):04X}" for one in text if not one.isprintable())


def check_printable(key: str, field: str) -> None:
    """``Invalid`` naming ``field`` for a key (rendered, or given to find runs by) that is not
    printable text."""
    if (character := unprintable(key)) is not None:
        raise Invalid(f"{field}: the key has {character}, {UNPRINTABLE}", field=field)


def check_key(key: str, field: str) -> str:
    """A rendered key is at most ``MAX_KEY_CHARS`` of printable text (``unprintable``: it is
    shown in reasons, listings and metrics) without braces (a run's spec keeps its rendered
    keys where its job has templates: a key renders to itself), else ``Invalid`` naming
    ``field``."""
    if not key:
        raise Invalid(f"{field}: the key renders empty", field=field)
    if len(key) > MAX_KEY_CHARS:
        raise Invalid(f"{field}: the key is longer than {MAX_KEY_CHARS} characters", field=field)
    check_printable(key, field)
    if "{" in key or "}" in key:
        raise Invalid(f"{field}: the key has a brace", field=field)
    return key


def render_key(
    template: str,
    params: Mapping[str, JsonValue],
    env: Mapping[str, str],
    field: str = "key",
) -> str:
    """The key ``template`` names for a run with ``params`` and ``env``; ``Invalid`` naming
    ``field`` and the missing value (``limits[0].key: params.account is not set``), or a
    key out of bounds."""
    placeholders(template)  # a stored template was checked; this one may not have been

    def missing(named: str) -> str:
        raise Invalid(f"{field}: {named} is not set", field=field)

    return check_key(templates.fill(template, {"params": params, "env": env}, missing), field)


class LimitSpec(_Strict):
    """What a tenant says of one limit: it bounds something (``max_running``, ``rate`` or
    ``debounce``); a strategy other than ``queue`` acts when ``max_running`` is reached, so
    it needs one."""

    description: Annotated[str, Field(max_length=1000)] = ""
    max_running: Annotated[int | None, Field(ge=1, le=MAX_RUNNING_PER_KEY)] = None
    rate: Rate | None = None
    strategy: LimitStrategy = LimitStrategy.QUEUE
    debounce: Debounce | None = None

    @model_validator(mode="after")
    def _bounds_something(self) -> LimitSpec:
        if self.max_running is None and self.rate is None and self.debounce is None:
            raise ValueError("a limit bounds something: give max_running, rate or debounce")
        if self.strategy is not LimitStrategy.QUEUE and self.max_running is None:
            raise ValueError(f"strategy {self.strategy.value} needs max_running")
        return self


def check_limit_name(name: str) -> str:
    """A limit's name is spelled as a pool's (lower case, so never an id)."""
    checked = check_pool_reference(name)
    assert checked is not None
    return checked


class Limit(LimitSpec):
    id: str
    name: str
    created_at: datetime
    updated_at: datetime
    version: int


class LimitKeyUsage(_Strict):
    """One key of a limit with active runs, as ``GET /v1/limits/{id}/keys`` lists it."""

    key: str
    running: int
    queued: int
    scheduled: int


class LimitReference(_Strict):
    """A job's, task's or schedule's use of a limit: its name and the key template."""

    limit: Annotated[str, Field(min_length=1, max_length=64)]
    key: Annotated[str, Field(min_length=1, max_length=MAX_TEMPLATE_CHARS)]

    @field_validator("limit")
    @classmethod
    def _name(cls, limit: str) -> str:
        return check_limit_name(limit)

    @field_validator("key")
    @classmethod
    def _template(cls, key: str) -> str:
        placeholders(key)
        return key


LimitReferences = Annotated[
    list[LimitReference],
    Field(
        max_length=MAX_LIMIT_REFERENCES,
        description="the limits its runs count against, each with the key template that "
        "names the run's key (docs/flow-control.md)",
    ),
]


def rendered_references(
    references: Sequence[tuple[str, LimitReference]],
    params: Mapping[str, JsonValue],
    env: Mapping[str, str],
) -> list[LimitReference]:
    """A run's limits with their keys rendered, one per limit (by name): of the references
    (each with the field it is at, ``limits.0``), a later one for the same limit wins (a
    task's or schedule's over its job's). ``Invalid`` naming ``….key`` and the missing
    value, or ``limits`` past ``MAX_LIMIT_REFERENCES`` limits in all."""
    winners = {reference.limit: (field, reference) for field, reference in references}
    if len(winners) > MAX_LIMIT_REFERENCES:
        raise Invalid(
            f"a run counts against at most {MAX_LIMIT_REFERENCES} limits; its job and "
            f"overrides name {len(winners)}",
            field="limits",
        )
    return [
        LimitReference(limit=name, key=render_key(reference.key, params, env, f"{field}.key"))
        for name, (field, reference) in sorted(winners.items())
    ]


def fielded(
    references: Iterable[LimitReference], prefix: str = ""
) -> list[tuple[str, LimitReference]]:
    """``references`` with the field each is at (``limits.0``, ``tasks.2.limits.1``…)."""
    return [(f"{prefix}limits.{index}", ref) for index, ref in enumerate(references)]
