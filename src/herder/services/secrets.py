"""A tenant's secrets by name: values go in, only metadata comes out."""

from __future__ import annotations

from herder.domain.listings import PageRequest
from herder.domain.models import Page
from herder.domain.secrets import Secret
from herder.store.store import Store


def put(store: Store, tenant_id: str, name: str, value: str) -> tuple[Secret, bool]:
    """The secret set to ``value``, and whether it is new."""
    return store.secrets.put(tenant_id, name, value)


def list_secrets(store: Store, tenant_id: str, *, page: PageRequest) -> Page[Secret]:
    return store.secrets.list(tenant_id, page=page)


def read(store: Store, tenant_id: str, name: str) -> Secret:
    return store.secrets.get(tenant_id, name)


def delete(store: Store, tenant_id: str, name: str) -> None:
    store.secrets.delete(tenant_id, name)
