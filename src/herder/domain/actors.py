"""Who a run's events name as having made a change. A person acts through an API key: the
event keeps the key's id (``user:key_…``, stable when the key is renamed or revoked), and the
API adds the key's name and role as it reads the event, for people to read; a worker's
(``worker:wrk_…``) is shown by the worker's name while it is registered.

**Creators.** Jobs, schedules, workflows, workflow runs and runs keep who made them
(``created_by``), an actor as above, set once and never changed by an edit; rows made before
migration 0037 have none (unknown). Who that is:

- a job, schedule or workflow: the caller who created it (``Principal.actor``), by the API,
  the dashboard or ``herder apply``;
- a run or workflow run started by hand (a submit, a batch, a re-run, a workflow run's start,
  a schedule fired by hand): the caller;
- a schedule's fire: ``schedule:<id>`` (``schedule_actor``), not the firer that fired it;
- an event's (a trigger's or a hook's request's) runs: ``event:<id>``, the event that
  started them, which names its sender;
- a backfill's runs: ``backfill:<id>``;
- a workflow task's run: its workflow run's creator (the person who started it, or its
  schedule), else ``workflow:<workflow run id>`` for a workflow run made before 0037.

People (``user:…``) are named as they are read (``app.actors.display_names``); the system's
actors are shown as they are.
"""

from __future__ import annotations

import re

from herder.domain.errors import Invalid

USER = "user:"
WORKER = "worker:"
SCHEDULE = "schedule:"
KEY_PREFIX = "key_"  # an API key's id
# What a ``created_by`` filter may name: a known kind, then an id-like tail (``me`` aside).
ACTOR_KINDS = ("user", "worker", "schedule", "event", "backfill", "workflow", "scheduler")
MAX_ACTOR_CHARS = 128  # the ``run_events.actor`` column's width
ME = "me"
_ACTOR = re.compile(rf"(?:{'|'.join(ACTOR_KINDS)}):[A-Za-z0-9][A-Za-z0-9_.-]*")  # whole


def user_actor(key_id: str) -> str:
    """The actor of a change made with the key ``key_id``."""
    return f"{USER}{key_id}"


def key_of(actor: str) -> str | None:
    """The key id of a person's actor; None for the system's (``worker:…``, the scheduler)."""
    return actor.removeprefix(USER) if actor.startswith(USER) else None


def schedule_actor(schedule_id: str) -> str:
    """The creator of a run (or workflow run) its schedule's fire started."""
    return f"{SCHEDULE}{schedule_id}"


def event_actor(event_id: str) -> str:
    """The creator of the runs an event started (through its triggers)."""
    return f"event:{event_id}"


def backfill_actor(backfill_id: str) -> str:
    """The creator of the runs a backfill started."""
    return f"backfill:{backfill_id}"


def api_key_of(actor: str) -> str | None:
    """The API key id of a person's actor made with a key (``user:key_…``); None for a
    signed-in person's (``user:usr_…``) and the system's."""
    key = key_of(actor)
    return key if key is not None and key.startswith(KEY_PREFIX) else None


def key_shown(name: str, role: str) -> str:
    """A key as people know it: ``ci (developer)``."""
    return f"{name} ({role})"


def worker_actor(worker_id: str) -> str:
    """The actor of a change a worker made (or that was made for it: its attempt reaped)."""
    return f"{WORKER}{worker_id}"


def worker_of(actor: str) -> str | None:
    """The worker id of a worker's actor; None for any other."""
    return actor.removeprefix(WORKER) if actor.startswith(WORKER) else None


def creator_wanted(value: str, caller_actor: str) -> str:
    """The creator a listing's ``created_by`` filter names: ``me`` is the caller; anything
    else must be an actor (``user:key_…``, ``schedule:sch_…``), else ``Invalid``."""
    if value == ME:
        return caller_actor
    if len(value) > MAX_ACTOR_CHARS or not _ACTOR.fullmatch(value):
        raise Invalid(
            f"created_by must be 'me' or an actor such as user:key_… or schedule:sch_…, "
            f"not {value[:40]!r}",
            field="created_by",
        )
    return value


def person_of(actor: str) -> str | None:
    """The user id of a signed-in person's actor (``user:usr_…``), else None."""
    key = key_of(actor)
    return key if key is not None and key.startswith("usr_") else None
