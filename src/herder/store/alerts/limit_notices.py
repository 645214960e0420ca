"""What the 24-hour notice reads and writes (``app/notices.py`` decides): the attempts that
timed out lately, with their run, job and the job's creator; whether the job has subscribers
of time-outs; the creator's email, within the run's tenant only; the owner's channel; and
each run once told (``limit_notices``, keyed by the run, so two evaluators tell it once).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import exists, insert, select

from herder.clock import epoch_ms
from herder.domain.actors import USER
from herder.domain.alerts.addresses import MAILTO, ChannelKind, checked_address
from herder.domain.alerts.notices import OWNER, NoticeEvent
from herder.domain.ids import new_id
from herder.domain.jobs import MAX_TIMEOUT_SECONDS
from herder.domain.states import AttemptState
from herder.store.dialect import insert_ignoring_duplicates
from herder.store.schema import alert_channels, attempts, job_notices, jobs, limit_notices, runs
from herder.store.schema import users as users_table
from herder.store.work import Work

MAX_TIMED_OUT_READ = 1000  # a pass's timed-out attempts; the rest wait for the next pass


@dataclass(frozen=True)
class TimedOut:
    run_id: str
    tenant_id: str
    job_id: str | None
    job_name: str
    attempt: int
    timeout_seconds: object  # as the run's spec says
    created_by: str | None  # the job's creator (an actor), when known
    run_state: str  # the run's now: ``timed_out`` once ended so, else retrying or dead


def timed_out_since(work: Work, since: datetime) -> list[TimedOut]:
    """Attempts that timed out with their reaper's deadline since ``since`` (the ``(state,
    deadline_at)`` index: that deadline is the timeout's end plus the stop's grace and a
    margin, so an attempt that timed out since ``since`` has it later), of runs not told
    yet whose timeout was the 24-hour maximum: the others are never told, so a cell's
    shorter time-outs, read first, would fill the pass and hold the notices back."""
    told = exists().where(limit_notices.c.run_id == runs.c.id)
    rows = work.connection.execute(
        select(
            runs.c.id, runs.c.tenant_id, runs.c.job_id, runs.c.job_name, runs.c.spec,
            attempts.c.number, jobs.c.created_by, runs.c.state,
        )
        .select_from(attempts)
        .join(runs, runs.c.id == attempts.c.run_id)
        .outerjoin(jobs, jobs.c.id == runs.c.job_id)
        .where(
            attempts.c.state == AttemptState.TIMED_OUT,
            attempts.c.deadline_at >= since,
            runs.c.spec["timeout_seconds"].as_integer() >= MAX_TIMEOUT_SECONDS,
            ~told,
        )
        .order_by(attempts.c.deadline_at)
        .limit(MAX_TIMED_OUT_READ)
    ).all()  # fmt: skip
    return [TimedOut(row.id, row.tenant_id, row.job_id, row.job_name, row.number,
                     (row.spec or {}).get("timeout_seconds"), row.created_by, row.state)
            for row in rows]  # fmt: skip


def has_time_out_subscribers(work: Work, tenant_id: str, job_id: str) -> bool:
    rows = work.connection.execute(
        select(job_notices.c.events).where(
            job_notices.c.tenant_id == tenant_id, job_notices.c.job_id == job_id
        )
    ).scalars()
    return any(NoticeEvent.TIMED_OUT.value in events for events in rows)


def owner_email(work: Work, tenant_id: str, actor: str | None) -> str | None:
    """A signed-in person's checked email, when the actor is one of the run's tenant's
    people (``user:usr_…``); an API key (``user:key_…``) has none."""
    if actor is None or not actor.startswith(f"{USER}usr_"):
        return None
    email = work.connection.execute(
        select(users_table.c.email).where(
            users_table.c.tenant_id == tenant_id, users_table.c.id == actor[len(USER) :]
        )
    ).scalar()
    if not email:
        return None
    try:
        return checked_address(ChannelKind.EMAIL, email).removeprefix(MAILTO)
    except ValueError:  # a provider's address we would not send to
        return None


def owner_channel(work: Work, tenant_id: str, email: str) -> str:
    """The tenant's ``owner`` channel to ``email``, made the first time. A developer may
    disable it (no more 24-hour notices to that person) or delete it (made again when due)."""
    url = MAILTO + email
    found = work.connection.execute(
        select(alert_channels.c.id).where(
            alert_channels.c.tenant_id == tenant_id,
            alert_channels.c.managed_by == OWNER,
            alert_channels.c.url == url,
        )
    ).scalar()
    if found is not None:
        return str(found)
    channel_id = new_id("ach", epoch_ms(work.now))
    work.connection.execute(
        insert(alert_channels).values(
            id=channel_id, tenant_id=tenant_id, name=f"owner.{channel_id}", kind=ChannelKind.EMAIL,
            url=url, enabled=True, managed_by=OWNER, created_at=work.now, updated_at=work.now,
        )
    )  # fmt: skip
    return channel_id


def mark_told(work: Work, tenant_id: str, run_id: str, told: str) -> bool:
    """Record the run as told; False when another evaluator did first."""
    inserted = work.connection.execute(
        insert_ignoring_duplicates(
            work.database, limit_notices, run_id=run_id, tenant_id=tenant_id, told=told,
            at=work.now,
        ).returning(limit_notices.c.run_id)
    ).first()  # fmt: skip
    return inserted is not None
