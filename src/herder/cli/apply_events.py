"""What ``herder apply`` does with triggers and hooks (docs/events.md), beside
``apply_remote``: read them as ``Existing`` objects, check before any change that a hook
to be made can have its secret, and create, change and delete them.

A hook's signing secret never comes back from the server, so apply never compares it: a
new hook gets the secret in the environment variable its ``secret_from`` names (read from
this process, never written anywhere), or a new one the server makes, printed here once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

from herder.cli.common import every
from herder.client import HerderClient
from herder.definitions.plan import Action, Existing, Step
from herder.definitions.problems import Kind, Problem, Where
from herder.domain.hooks import HookSpec, Secret
from herder.domain.triggers import TriggerSpec

KINDS = (Kind.HOOK, Kind.TRIGGER)
_SECRET: TypeAdapter[str] = TypeAdapter(Secret)


def read_existing(client: HerderClient) -> Iterator[Existing]:
    """Every hook and trigger of the tenant, in the shape of their definitions."""
    for hook in every(client.list_hooks):
        fields = hook.model_dump(mode="json", include=set(HookSpec.model_fields))
        yield Existing(Kind.HOOK, hook.name, hook.id, fields)
    for trigger in every(client.list_triggers):
        fields = trigger.model_dump(mode="json", include=set(TriggerSpec.model_fields))
        yield Existing(Kind.TRIGGER, trigger.name, trigger.id, fields)


def secret_problems(steps: list[Step], environment: Mapping[str, str]) -> list[Problem]:
    """A hook to be made whose ``secret_from`` names a variable that is not set, or holds no
    usable secret: said before anything changes."""
    problems = []
    for step in steps:
        definition = step.definition
        if step.action is not Action.CREATE or definition is None or not definition.secret_from:
            continue
        where = definition.where
        where = Where(where.file, where.line, f"{where.path}.secret_from")
        variable = definition.secret_from
        try:
            _SECRET.validate_python(environment[variable])
        except KeyError:
            problems.append(Problem(f"the environment variable {variable} is not set", where))
        except ValidationError as error:
            message = error.errors(include_url=False)[0]["msg"]
            problems.append(Problem(f"the secret in {variable}: {message}", where))
    return problems


class EventKinds:
    """Creates, changes and deletes hooks and triggers for ``apply_remote.Applier``; ``say``
    prints a made hook's URL and secret the moment the server answers (a later step may
    fail, and the secret is never shown again)."""

    def __init__(
        self, client: HerderClient, environment: Mapping[str, str], say: Callable[[str], None]
    ) -> None:
        self._client = client
        self._environment = environment
        self._say = say

    def create(self, step: Step) -> str:
        """The new object's id."""
        assert step.definition is not None
        fields, variable = step.definition.fields, step.definition.secret_from
        if step.kind is Kind.TRIGGER:
            return self._client.create_trigger(step.name, fields).id
        secret = None if variable is None else self._environment[variable]
        hook = self._client.create_hook(step.name, fields, secret=secret)
        url = self._client.hook_url(hook)
        if secret is None:
            self._say(
                f"hook {hook.name}: URL {url}\n  secret {hook.secret}\n"
                "  (this secret will not be shown again: give it and the URL to the sender now)"
            )
        else:
            self._say(f"hook {hook.name}: URL {url} (its secret from ${variable})")
        return hook.id

    def update(self, step: Step, item_id: str) -> None:
        assert step.definition is not None
        fields: dict[str, Any] = step.definition.fields
        if step.kind is Kind.TRIGGER:
            self._client.update_trigger(item_id, fields)
        else:
            self._client.update_hook(item_id, fields)

    def delete(self, kind: Kind, item_id: str) -> None:
        if kind is Kind.TRIGGER:
            self._client.delete_trigger(item_id)
        else:
            self._client.delete_hook(item_id)
