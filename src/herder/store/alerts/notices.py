"""A person's notices of a job (``herder.domain.alerts.notices``): the subscription's row,
its channel (its own, or one of the tenant's by name) and a rule of an existing kind per
event, written together in one transaction, each marked ``managed_by`` the subscription.

Subscribing again changes it in place: the rules of events still wanted are kept (an open
incident stays open: no second notice), those no longer wanted deleted (their incidents
resolved without a notice, as for any rule deleted), new ones made; its own channel is kept
while its address is the same.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, exc, insert, select, update

from herder.clock import Clock, epoch_ms
from herder.domain.alerts.addresses import ChannelKind, masked_url
from herder.domain.alerts.notices import (
    NOTICE_PREFIX,
    JobNotice,
    NoticeEvent,
    Target,
    rule_of,
)
from herder.domain.alerts.rules import RuleParams
from herder.domain.errors import Conflict, Invalid, NotFound
from herder.domain.ids import new_id
from herder.store.alerts.channel_secrets import ChannelSecrets
from herder.store.alerts.channels import check_target
from herder.store.alerts.rules import resolve_open
from herder.store.database import Database
from herder.store.schema import alert_channels, alert_deliveries, alert_rules, job_notices, jobs


class NoticeRepository:
    def __init__(self, database: Database, clock: Clock, secrets: ChannelSecrets) -> None:
        self._db = database
        self._clock = clock
        self._secrets = secrets

    def subscribe(
        self,
        tenant_id: str,
        job_id: str,
        subscriber: str,
        events: list[NoticeEvent],
        target: Target,
        *,
        allow_private: bool,
    ) -> JobNotice:
        """Make or change the subscriber's notices of the job; what it is now."""
        if target.kind is ChannelKind.SLACK:
            try:
                check_target(target.url, allow_private=allow_private)
            except Invalid as error:
                raise Invalid(f"to: {error.detail}", field="to") from error
        wanted = list(dict.fromkeys(events))
        now = self._clock.now()
        try:
            with self._db.write() as connection:
                _job(connection, tenant_id, job_id)
                current = _notice_row(connection, tenant_id, job_id, subscriber, for_update=True)
                notice_id = current.id if current else new_id(NOTICE_PREFIX, epoch_ms(now))
                channel_id = self._channel(connection, tenant_id, notice_id, target)
                self._rules(connection, tenant_id, job_id, notice_id, wanted, channel_id)
                values = {"events": [one.value for one in wanted], "channel_id": channel_id,
                          "updated_at": now}  # fmt: skip
                if current is None:
                    connection.execute(
                        insert(job_notices).values(
                            id=notice_id, tenant_id=tenant_id, job_id=job_id,
                            subscriber=subscriber, created_at=now, **values,
                        )
                    )  # fmt: skip
                else:
                    connection.execute(
                        update(job_notices).where(job_notices.c.id == notice_id).values(**values)
                    )
                return _shown(connection, tenant_id, job_id, subscriber)
        except exc.IntegrityError as error:  # a second subscribe raced this one's first
            raise Conflict("these notices were changed meanwhile; try again") from error

    def get(self, tenant_id: str, job_id: str, subscriber: str) -> JobNotice:
        with self._db.read() as connection:
            _job(connection, tenant_id, job_id)
            return _shown(connection, tenant_id, job_id, subscriber)

    def unsubscribe(self, tenant_id: str, job_id: str, subscriber: str) -> None:
        """The subscription, its rules (open incidents resolved, no notice) and its own
        channel (with its deliveries) go."""
        with self._db.write() as connection:
            _job(connection, tenant_id, job_id)
            current = _notice_row(connection, tenant_id, job_id, subscriber, for_update=True)
            if current is None:
                raise NotFound(f"you have no notices of job {job_id}")
            _drop(connection, tenant_id, current.id, self._clock.now())

    def _channel(
        self, connection: Connection, tenant_id: str, notice_id: str, target: Target
    ) -> str:
        """The channel the notices go to: one of the tenant's by name (not another notice's
        own), or the notice's own — kept while its address is the same, else made anew."""
        own = connection.execute(
            select(alert_channels).where(
                alert_channels.c.tenant_id == tenant_id, alert_channels.c.managed_by == notice_id
            )
        ).first()
        if target.kind is None:
            named = connection.execute(
                select(alert_channels.c.id, alert_channels.c.managed_by).where(
                    alert_channels.c.tenant_id == tenant_id,
                    alert_channels.c.name == target.channel,
                )
            ).first()
            if named is None:
                raise Invalid(f"to: no alert channel named {target.channel!r}", field="to")
            if named.managed_by not in (None, notice_id):
                raise Invalid(
                    f"to: alert channel {target.channel!r} is another notice's own", field="to"
                )
            if named.managed_by is None:
                _drop_own_channel(connection, tenant_id, notice_id)
            return str(named.id)
        if (
            own is not None
            and own.kind == ChannelKind.EMAIL == target.kind
            and own.url == target.url
        ):
            return str(own.id)  # a Slack URL is kept sealed: a new one is sealed anew
        _drop_own_channel(connection, tenant_id, notice_id)
        now = self._clock.now()
        channel_id = new_id("ach", epoch_ms(now))
        columns: dict[str, Any] = {"url": target.url}
        if target.kind is ChannelKind.SLACK:
            sealed = self._secrets.sealed_columns(tenant_id, channel_id, target.url)
            columns = {**sealed, "url": masked_url(target.url)}
        connection.execute(
            insert(alert_channels).values(
                id=channel_id, tenant_id=tenant_id, name=f"notice.{notice_id}",
                kind=target.kind, enabled=True, managed_by=notice_id,
                created_at=now, updated_at=now, **columns,
            )
        )  # fmt: skip
        return channel_id

    def _rules(
        self,
        connection: Connection,
        tenant_id: str,
        job_id: str,
        notice_id: str,
        wanted: list[NoticeEvent],
        channel_id: str,
    ) -> None:
        """One rule per wanted event, sending to ``channel_id``; the others deleted."""
        now = self._clock.now()
        rows = connection.execute(
            select(alert_rules.c.id, alert_rules.c.name, alert_rules.c.channel_ids).where(
                alert_rules.c.tenant_id == tenant_id, alert_rules.c.managed_by == notice_id
            )
        ).all()
        have = {row.name: row for row in rows}
        names = {f"notice.{notice_id}.{event.value}": event for event in wanted}
        for name, row in have.items():
            if name not in names:
                _delete_rule(connection, row.id, now)
            elif row.channel_ids != [channel_id]:
                connection.execute(
                    update(alert_rules)
                    .where(alert_rules.c.id == row.id)
                    .values(channel_ids=[channel_id], updated_at=now)
                )
        for name, event in names.items():
            if name in have:
                continue
            kind, params = rule_of(event, job_id)
            connection.execute(
                insert(alert_rules).values(
                    id=new_id("alr", epoch_ms(now)), tenant_id=tenant_id, name=name, kind=kind,
                    params=RuleParams.model_validate(params).shown(kind),
                    channel_ids=[channel_id], enabled=True,
                    notify_recovery=event in (NoticeEvent.FAILED, NoticeEvent.TIMED_OUT),
                    evaluated_at=now, managed_by=notice_id, created_at=now, updated_at=now,
                )
            )  # fmt: skip


def drop_job_notices(connection: Connection, tenant_id: str, job_id: str, now: datetime) -> None:
    """Every notice of the job goes with it, rules and own channels too: once the job is
    gone nothing else could remove them (their parts are refused by hand, and the job's
    notices answer 404), and they would judge a job that is no more."""
    notice_ids = connection.execute(
        select(job_notices.c.id).where(
            job_notices.c.tenant_id == tenant_id, job_notices.c.job_id == job_id
        )
    ).scalars()
    for notice_id in list(notice_ids):
        _drop(connection, tenant_id, notice_id, now)


def _drop(connection: Connection, tenant_id: str, notice_id: str, now: datetime) -> None:
    """The notice, its rules (open incidents resolved, no notice) and its own channel (with
    its deliveries)."""
    rule_ids = connection.execute(
        select(alert_rules.c.id).where(
            alert_rules.c.tenant_id == tenant_id, alert_rules.c.managed_by == notice_id
        )
    ).scalars()
    for rule_id in list(rule_ids):
        _delete_rule(connection, rule_id, now)
    _drop_own_channel(connection, tenant_id, notice_id)
    connection.execute(delete(job_notices).where(job_notices.c.id == notice_id))


def _delete_rule(connection: Connection, rule_id: str, now: datetime) -> None:
    connection.execute(delete(alert_rules).where(alert_rules.c.id == rule_id))
    resolve_open(connection, rule_id, "rule deleted", now)


def _job(connection: Connection, tenant_id: str, job_id: str) -> None:
    found = connection.execute(
        select(jobs.c.id).where(jobs.c.tenant_id == tenant_id, jobs.c.id == job_id)
    ).first()
    if found is None:
        raise NotFound(f"job {job_id[:64]} not found")


def _notice_row(
    connection: Connection, tenant_id: str, job_id: str, subscriber: str, *, for_update: bool
) -> Any:
    query = select(job_notices).where(
        job_notices.c.tenant_id == tenant_id,
        job_notices.c.job_id == job_id,
        job_notices.c.subscriber == subscriber,
    )
    return connection.execute(query.with_for_update() if for_update else query).first()


def _drop_own_channel(connection: Connection, tenant_id: str, notice_id: str) -> None:
    own = select(alert_channels.c.id).where(
        alert_channels.c.tenant_id == tenant_id, alert_channels.c.managed_by == notice_id
    )
    connection.execute(delete(alert_deliveries).where(alert_deliveries.c.channel_id.in_(own)))
    connection.execute(
        delete(alert_channels).where(
            alert_channels.c.tenant_id == tenant_id, alert_channels.c.managed_by == notice_id
        )
    )


def _shown(connection: Connection, tenant_id: str, job_id: str, subscriber: str) -> JobNotice:
    row = _notice_row(connection, tenant_id, job_id, subscriber, for_update=False)
    if row is None:
        raise NotFound(f"you have no notices of job {job_id[:64]}")
    channel = connection.execute(
        select(alert_channels.c.name, alert_channels.c.url, alert_channels.c.managed_by).where(
            alert_channels.c.tenant_id == tenant_id, alert_channels.c.id == row.channel_id
        )
    ).first()
    to = row.channel_id if channel is None else channel.name
    if channel is not None and channel.managed_by == row.id:
        to = channel.url
    rule_ids = connection.execute(
        select(alert_rules.c.id)
        .where(alert_rules.c.tenant_id == tenant_id, alert_rules.c.managed_by == row.id)
        .order_by(alert_rules.c.id)
    ).scalars()
    return JobNotice(
        id=row.id, job_id=row.job_id, subscriber=row.subscriber, on=row.events, to=to,
        channel_id=row.channel_id, rule_ids=list(rule_ids),
        created_at=row.created_at, updated_at=row.updated_at,
    )  # fmt: skip
