"""/v1/alert-channels, /v1/alert-rules, /v1/alerts and /v1/alert-deliveries: a tenant's
channels (webhooks, email, Slack), the rules that alert through them, the incidents they
opened and every delivery (with each attempt) made for them."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response, status
from pydantic import BaseModel

from herder.api.auth import Caller, StoreDep, Writer
from herder.api.openapi import problems
from herder.api.queries import CursorPaging, ItemName, Paging
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
from herder.domain.models import Page

router = APIRouter(tags=["alerts"])


class TestQueued(BaseModel):
    delivery_id: str


def _allow_private(request: Request) -> bool:
    return bool(request.app.state.settings.allow_private_alert_targets)


@router.post("/v1/alert-channels", status_code=status.HTTP_201_CREATED, responses=problems(409))
def create_channel(
    body: ChannelRequest, caller: Writer, store: StoreDep, request: Request, response: Response
) -> CreatedChannel:
    """A channel of its ``kind``: ``webhook`` (its ``secret``, the key of its signatures, is in
    this answer only), ``email`` (``url``: mailto:…) or ``slack`` (``url``: the incoming
    webhook's, kept sealed and shown masked)."""
    channel = store.alert_channels.create(
        caller.tenant_id, body, allow_private=_allow_private(request)
    )
    response.headers["Location"] = f"/v1/alert-channels/{channel.id}"
    return channel


@router.get("/v1/alert-channels")
def list_channels(
    caller: Caller,
    store: StoreDep,
    page: Paging,
    name: ItemName = None,
) -> Page[Channel]:
    return store.alert_channels.list(caller.tenant_id, page=page, name=name)


@router.get("/v1/alert-channels/{channel_id}")
def get_channel(channel_id: str, caller: Caller, store: StoreDep) -> Channel:
    return store.alert_channels.get(caller.tenant_id, channel_id)


@router.patch("/v1/alert-channels/{channel_id}", responses=problems(409))
def update_channel(
    channel_id: str, body: ChannelChanges, caller: Writer, store: StoreDep, request: Request
) -> Channel:
    return store.alert_channels.update(
        caller.tenant_id, channel_id, body, allow_private=_allow_private(request)
    )


@router.delete(
    "/v1/alert-channels/{channel_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=problems(409),
)
def delete_channel(channel_id: str, caller: Writer, store: StoreDep) -> Response:
    """The channel and its deliveries; rules that named it stop naming it."""
    store.alert_channels.delete(caller.tenant_id, channel_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/v1/alert-channels/{channel_id}/test", status_code=status.HTTP_202_ACCEPTED)
def test_channel(channel_id: str, caller: Writer, store: StoreDep) -> TestQueued:
    """Queue a test delivery (even to a disabled channel; signed, to a webhook); follow it in
    ``/v1/alert-deliveries``."""
    return TestQueued(delivery_id=store.alert_channels.send_test(caller.tenant_id, channel_id))


@router.post("/v1/alert-rules", status_code=status.HTTP_201_CREATED, responses=problems(409))
def create_rule(body: RuleRequest, caller: Writer, store: StoreDep, response: Response) -> Rule:
    """A rule; what it names (job, schedule, workflow, channels) must be the tenant's."""
    rule = store.alert_rules.create(caller.tenant_id, body)
    response.headers["Location"] = f"/v1/alert-rules/{rule.id}"
    return rule


@router.get("/v1/alert-rules")
def list_rules(
    caller: Caller,
    store: StoreDep,
    page: Paging,
    name: ItemName = None,
) -> Page[Rule]:
    return store.alert_rules.list(caller.tenant_id, page=page, name=name)


@router.get("/v1/alert-rules/{rule_id}")
def get_rule(rule_id: str, caller: Caller, store: StoreDep) -> Rule:
    return store.alert_rules.get(caller.tenant_id, rule_id)


@router.patch("/v1/alert-rules/{rule_id}", responses=problems(409))
def update_rule(rule_id: str, body: RuleChanges, caller: Writer, store: StoreDep) -> Rule:
    """Change some fields; ``params``, when given, replace the rule's params whole."""
    return store.alert_rules.update(caller.tenant_id, rule_id, body)


@router.delete(
    "/v1/alert-rules/{rule_id}", status_code=status.HTTP_204_NO_CONTENT, responses=problems(409)
)
def delete_rule(rule_id: str, caller: Writer, store: StoreDep) -> Response:
    """The rule and its incidents (deliveries made stay listed)."""
    store.alert_rules.delete(caller.tenant_id, rule_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/v1/alerts")
def list_incidents(
    caller: Caller,
    store: StoreDep,
    page: CursorPaging,
    state: IncidentState | None = None,
    rule_id: Annotated[str | None, Query(max_length=40)] = None,
) -> Page[Incident]:
    """Incidents, newest first: one per episode of a rule's condition, open until it clears."""
    return store.alert_history.incidents(caller.tenant_id, state=state, rule_id=rule_id, page=page)


@router.get("/v1/alert-deliveries", responses=problems(404))
def list_deliveries(
    caller: Caller,
    store: StoreDep,
    page: CursorPaging,
    channel_id: Annotated[str | None, Query(max_length=40)] = None,
) -> Page[Delivery]:
    """Deliveries, newest first, each with every attempt made (``history``)."""
    return store.alert_history.deliveries(caller.tenant_id, channel_id=channel_id, page=page)
