"""/v1/secrets: a tenant's secrets by name. A value is only ever sent (PUT), never shown:
every answer is the secret's metadata. Developers and admins set and delete; every role of
the tenant may list them."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response, status

from herder.api.auth import Caller, StoreDep, Writer
from herder.api.openapi import problems
from herder.api.queries import CursorPaging
from herder.domain.models import Page
from herder.domain.secrets import NAME_RULE, Secret, SecretValue

router = APIRouter(prefix="/v1/secrets", tags=["secrets"])


@router.put(
    "/{name}", responses={201: {"description": "created", "model": Secret}, **problems(409)}
)
def put_secret(
    name: Annotated[str, Path(description=NAME_RULE)],
    body: SecretValue,
    caller: Writer,
    store: StoreDep,
    response: Response,
) -> Secret:
    """Create the secret (201) or give it a new value (200, its version one more). Attempts
    that start afterwards get the new value; running ones keep theirs. A tenant holds at
    most 1000 secrets (409)."""
    secret, created = store.secrets.put(caller.tenant_id, name, body.value)
    if created:
        response.status_code = status.HTTP_201_CREATED
        response.headers["Location"] = f"/v1/secrets/{name}"
    return secret


@router.get("")
def list_secrets(
    caller: Caller,
    store: StoreDep,
    page: CursorPaging,
) -> Page[Secret]:
    """By name: names, versions and times, never a value."""
    return store.secrets.list(caller.tenant_id, page=page)


@router.get("/{name}")
def get_secret(name: str, caller: Caller, store: StoreDep) -> Secret:
    return store.secrets.get(caller.tenant_id, name)


@router.delete("/{name}", status_code=status.HTTP_204_NO_CONTENT)
def delete_secret(name: str, caller: Writer, store: StoreDep) -> Response:
    """Gone at once. A job that names it can no longer be changed until it is set again, and
    an attempt that starts without it fails, saying which secret is missing."""
    store.secrets.delete(caller.tenant_id, name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
