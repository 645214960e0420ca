"""A job's notices: a person's subscription (``herder job notify``) and the 24-hour notice.

subscribe   where to: the ``to`` given (an address, a Slack URL, a channel's name), else the
            signed-in person's email (a key has none: 422 naming ``to``); then the store
            writes the subscription, its channel and rules in one transaction
tell_owners the ``alerts`` loop's, once a minute. read: attempts that timed out lately, of
            runs not told yet; decide: those whose own timeout was the 24-hour maximum
            (``domain.alerts.notices.at_the_limit``) and who is told — the job's subscribers
            of time-outs, whose rule tells them as the run ends, when it ended ``timed_out``
            (a run that retries, or ends ``dead``, is not one their rule reports), else its
            creator's email when the creator is one of the run's tenant's people; apply: the
            run marked told (once, whoever races), a delivery queued to the owner's channel
"""

from __future__ import annotations

from datetime import datetime, timedelta

from herder.domain.alerts.notices import (
    JobNotice,
    NoticeRequest,
    at_the_limit,
    limit_notice,
    target_of,
)
from herder.domain.errors import Invalid
from herder.domain.models import Principal
from herder.domain.states import RunState
from herder.store.alerts.channels import add_deliveries
from herder.store.alerts.limit_notices import (
    has_time_out_subscribers,
    mark_told,
    owner_channel,
    owner_email,
    timed_out_since,
)
from herder.store.store import Store

LOOK_BACK = timedelta(hours=1)  # a loop down longer than this tells no one of what it missed


def subscribe(
    store: Store, caller: Principal, job_id: str, request: NoticeRequest, *, allow_private: bool
) -> JobNotice:
    to = request.to if request.to is not None else caller.email
    if not to:
        raise Invalid(
            "to: this key has no email of its own; give an address, a Slack webhook's URL or "
            "an alert channel's name",
            field="to",
        )
    try:
        target = target_of(to)
    except ValueError as error:
        raise Invalid(f"to: {error}", field="to") from error
    return store.job_notices.subscribe(
        caller.tenant_id, job_id, caller.actor, request.on, target, allow_private=allow_private
    )


def tell_owners(store: Store) -> list[str]:
    """Tell the owners of runs stopped at the 24-hour limit; the runs told."""
    told: list[str] = []
    with store.work() as work:
        since: datetime = work.now - LOOK_BACK
        for hit in timed_out_since(work, since):
            if not at_the_limit(hit.timeout_seconds):
                continue
            if (
                hit.run_state == RunState.TIMED_OUT  # what the subscribers' rule reports
                and hit.job_id
                and has_time_out_subscribers(work, hit.tenant_id, hit.job_id)
            ):
                mark_told(work, hit.tenant_id, hit.run_id, "subscribers")
                continue
            email = owner_email(work, hit.tenant_id, hit.created_by)
            if email is None:
                mark_told(work, hit.tenant_id, hit.run_id, "nobody")
                continue
            if not mark_told(work, hit.tenant_id, hit.run_id, "owner"):
                continue
            channel_id = owner_channel(work, hit.tenant_id, email)
            payload = limit_notice(hit.tenant_id, hit.run_id, hit.job_id or "", hit.job_name,
                                   hit.attempt, work.now)  # fmt: skip
            add_deliveries(work.database, work.connection, hit.tenant_id, [channel_id], None,
                           "opened", payload, work.now)  # fmt: skip
            told.append(hit.run_id)
    return told
