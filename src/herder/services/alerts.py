"""A tenant's webhook channels, the rules that alert through them, and what they opened and
sent. The store checks a target and what a rule names; these pass each use case on."""

from __future__ import annotations

from herder.domain.alerts.rules import (
    Channel,
    ChannelChanges,
    ChannelRequest,
    CreatedChannel,
    Delivery,
    Incident,
    IncidentState,
    Rule,
    RuleChanges,
    RuleRequest,
)
from herder.domain.listings import PageRequest
from herder.domain.models import Page
from herder.store.store import Store


def create_channel(
    store: Store, tenant_id: str, request: ChannelRequest, *, allow_private: bool
) -> CreatedChannel:
    """A channel with a new signing secret, shown in this answer only."""
    return store.alert_channels.create(tenant_id, request, allow_private=allow_private)


def list_channels(
    store: Store,
    tenant_id: str,
    *,
    page: PageRequest,
    name: str | None = None,
) -> Page[Channel]:
    return store.alert_channels.list(tenant_id, page=page, name=name)


def read_channel(store: Store, tenant_id: str, channel_id: str) -> Channel:
    return store.alert_channels.get(tenant_id, channel_id)


def update_channel(
    store: Store, tenant_id: str, channel_id: str, changes: ChannelChanges, *, allow_private: bool
) -> Channel:
    return store.alert_channels.update(tenant_id, channel_id, changes, allow_private=allow_private)


def delete_channel(store: Store, tenant_id: str, channel_id: str) -> None:
    store.alert_channels.delete(tenant_id, channel_id)


def send_test(store: Store, tenant_id: str, channel_id: str) -> str:
    """The id of a signed test delivery queued to the channel."""
    return store.alert_channels.send_test(tenant_id, channel_id)


def create_rule(store: Store, tenant_id: str, request: RuleRequest) -> Rule:
    return store.alert_rules.create(tenant_id, request)


def list_rules(
    store: Store,
    tenant_id: str,
    *,
    page: PageRequest,
    name: str | None = None,
) -> Page[Rule]:
    return store.alert_rules.list(tenant_id, page=page, name=name)


def read_rule(store: Store, tenant_id: str, rule_id: str) -> Rule:
    return store.alert_rules.get(tenant_id, rule_id)


def update_rule(store: Store, tenant_id: str, rule_id: str, changes: RuleChanges) -> Rule:
    return store.alert_rules.update(tenant_id, rule_id, changes)


def delete_rule(store: Store, tenant_id: str, rule_id: str) -> None:
    store.alert_rules.delete(tenant_id, rule_id)


def list_incidents(
    store: Store,
    tenant_id: str,
    *,
    state: IncidentState | None,
    rule_id: str | None,
    page: PageRequest,
) -> Page[Incident]:
    return store.alert_history.incidents(tenant_id, state=state, rule_id=rule_id, page=page)


def list_deliveries(
    store: Store, tenant_id: str, *, channel_id: str | None, page: PageRequest
) -> Page[Delivery]:
    return store.alert_history.deliveries(tenant_id, channel_id=channel_id, page=page)
