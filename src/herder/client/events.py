"""The client's event calls (mixed into ``HerderClient``): events a tenant sends, the
triggers that start work from them, and inbound webhooks with their deliveries
(docs/events.md). Triggers and hooks are named by id or name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, Unpack
from urllib.parse import quote

import httpx
from pydantic import BaseModel, JsonValue

from herder.client.pages import CursorKeywords, PageKeywords, page_params
from herder.client.schedules import drop_none
from herder.domain.events import Event, EventSummary, ReceivedEvent
from herder.domain.hooks import CreatedHook, Delivery, Hook
from herder.domain.models import Page
from herder.domain.triggers import Trigger

Model = TypeVar("Model", bound=BaseModel)


class EventCalls:
    url: str  # HerderClient's: the server's base URL
    _request: Callable[..., httpx.Response]  # HerderClient's: one call, errors mapped

    # --- events ---

    def send_event(
        self, name: str, payload: JsonValue = None, *, event_id: str | None = None
    ) -> ReceivedEvent:
        """Record the event (``payload`` None: ``{}``) and start what its triggers say; each
        trigger's outcome is in ``event.outcomes``. An ``event_id`` sent before starts
        nothing (``duplicate``)."""
        body = drop_none({"name": name, "payload": payload, "id": event_id})
        return ReceivedEvent.model_validate(self._request("POST", "/v1/events", json=body).json())

    def list_events(
        self,
        *,
        name: str | None = None,
        **page: Unpack[PageKeywords],
    ) -> Page[EventSummary]:
        """Newest first, without payloads."""
        return self._page("/v1/events", EventSummary, page_params(page) | drop_none({"name": name}))

    def get_event(self, event_id: str) -> Event:
        return Event.model_validate(self._request("GET", f"/v1/events/{quote(event_id)}").json())

    # --- triggers ---

    def create_trigger(self, name: str, spec: dict[str, Any]) -> Trigger:
        """``spec``: ``event``, ``job`` or ``workflow``, ``filter``, ``params``, ``enabled``
        (TriggerSpec); a filter the server cannot parse is a 422 saying where."""
        response = self._request("POST", "/v1/triggers", json={"name": name, **spec})
        return Trigger.model_validate(response.json())

    def list_triggers(self, **page: Unpack[PageKeywords]) -> Page[Trigger]:
        return self._page("/v1/triggers", Trigger, page_params(page))

    def get_trigger(self, trigger: str) -> Trigger:
        return Trigger.model_validate(self._request("GET", f"/v1/triggers/{quote(trigger)}").json())

    def update_trigger(
        self, trigger: str, changes: dict[str, Any], *, if_version: int | None = None
    ) -> Trigger:
        """Each field given replaces the stored one (None clears ``filter``)."""
        return Trigger.model_validate(
            self._patch(f"/v1/triggers/{quote(trigger)}", changes, if_version)
        )

    def delete_trigger(self, trigger: str) -> None:
        self._request("DELETE", f"/v1/triggers/{quote(trigger)}")

    # --- inbound webhooks ---

    def create_hook(
        self, name: str, spec: dict[str, Any], *, secret: str | None = None
    ) -> CreatedHook:
        """``spec``: ``scheme``, ``event``, ``rate_per_second``, ``burst``, ``enabled``
        (HookSpec). The answer holds the signing secret (``secret``, else a new one): the
        only time the server ever shows it."""
        body = drop_none({"name": name, **spec, "secret": secret})
        return CreatedHook.model_validate(self._request("POST", "/v1/hooks", json=body).json())

    def list_hooks(self, **page: Unpack[PageKeywords]) -> Page[Hook]:
        return self._page("/v1/hooks", Hook, page_params(page))

    def get_hook(self, hook: str) -> Hook:
        """By id or name; never its secret."""
        return Hook.model_validate(self._request("GET", f"/v1/hooks/{quote(hook)}").json())

    def update_hook(
        self, hook: str, changes: dict[str, Any], *, if_version: int | None = None
    ) -> Hook:
        """Its spec's fields; a new secret: ``rotate_hook_secret``."""
        return Hook.model_validate(self._patch(f"/v1/hooks/{quote(hook)}", changes, if_version))

    def rotate_hook_secret(self, hook: str, *, secret: str | None = None) -> CreatedHook:
        """A new signing secret (``secret``, else a new one), in this answer only."""
        response = self._request(
            "POST", f"/v1/hooks/{quote(hook)}/secret", json=drop_none({"secret": secret})
        )
        return CreatedHook.model_validate(response.json())

    def delete_hook(self, hook: str) -> None:
        """Its URL answers 404 from then on."""
        self._request("DELETE", f"/v1/hooks/{quote(hook)}")

    def hook_deliveries(self, hook: str, **page: Unpack[CursorKeywords]) -> Page[Delivery]:
        """Every request that got past the hook's rate, newest first, without bodies."""
        return self._page(f"/v1/hooks/{quote(hook)}/deliveries", Delivery, page_params(page))

    def hook_url(self, hook: Hook) -> str:
        """The full URL a sender posts to: this server's base URL and the hook's path."""
        return f"{self.url}{hook.url}"

    def _page(self, path: str, model: type[Model], params: dict[str, Any]) -> Page[Model]:
        response = self._request("GET", path, params=params)
        return Page[model].model_validate(response.json())  # type: ignore[valid-type]

    def _patch(self, path: str, changes: dict[str, Any], if_version: int | None) -> Any:
        """A PATCH's answer as JSON; with ``if_version``, only if still at that version (else
        412)."""
        headers = {} if if_version is None else {"If-Match": f'"{if_version}"'}
        return self._request("PATCH", path, json=changes, headers=headers).json()
