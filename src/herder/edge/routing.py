"""Which cell a request goes to, decided from the request alone, with no lookup: the tenant
its API key names (``ten_….key_….secret``), or for an inbound webhook (``POST
/v1/hooks/{address}``, no key: its signature is its credential) the tenant its hook's
address names (``ten_….hook_…``). Anything else — a key made before cells (two parts), no
key, a worker's credential — goes to the default cell, where everything made before cells
lives. No header picks a cell; a tenant part the cell does not find its key's is refused
there (401), so a forged one reaches only a cell that refuses it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from herder.domain.keys import parse_api_token

TENANT_ID = re.compile(r"^ten_[0-9A-Z]{1,64}$")
INBOUND_HOOK = re.compile(r"^/v1/hooks/(?P<address>[^/]+)/?$")  # as api/limits.py's


@dataclass(frozen=True)
class ToTenant:
    tenant_id: str


@dataclass(frozen=True)
class ToDefault:
    """A request that names no tenant: the default cell's."""


@dataclass(frozen=True)
class Malformed:
    """A tenant part that no tenant id has: refused at the edge as an unknown key."""


Destination = ToTenant | ToDefault | Malformed


def bearer_token(authorization: str | None) -> str | None:
    scheme, _, token = (authorization or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def destination(method: str, path: str, authorization: str | None) -> Destination:
    hook = INBOUND_HOOK.match(path) if method == "POST" else None
    if hook is not None:
        tenant, dot, _ = hook["address"].rpartition(".")
        return _tenant(tenant) if dot else ToDefault()
    return key_destination(authorization)


def key_destination(authorization: str | None) -> Destination:
    """Where the key alone sends a request."""
    token = bearer_token(authorization)
    parsed = parse_api_token(token) if token is not None else None
    if parsed is None or parsed.tenant_id is None:
        return ToDefault()
    return _tenant(parsed.tenant_id)


def _tenant(tenant_id: str) -> ToTenant | Malformed:
    return ToTenant(tenant_id) if TENANT_ID.match(tenant_id) else Malformed()
