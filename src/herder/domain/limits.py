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

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

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


class LimitSpec(_Strict):
    """What a tenant says of one limit."""

    description: Annotated[str, Field(max_length=1000)] = ""
    max_running: Annotated[int | None, Field(ge=1, le=MAX_RUNNING_PER_KEY)] = None
    rate: Rate | None = None
    strategy: LimitStrategy = LimitStrategy.QUEUE
    debounce: Debounce | None = None


class LimitReference(_Strict):
    """A job's, task's or schedule's use of a limit: its name and the key template."""

    limit: Annotated[str, Field(min_length=1, max_length=64)]
    key: Annotated[str, Field(min_length=1, max_length=MAX_TEMPLATE_CHARS)]
