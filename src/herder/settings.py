"""Server settings, from flags and ``HERDER_*`` environment variables.

The CLI and the worker read these too (the home directory), so this module loads no store
module: the cold tier's comes when a server asks for it."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from herder.domain.alerts.outbound import Outbound, parse_dashboard_url, parse_relay
from herder.domain.cells import NAME_PATTERN
from herder.domain.history import DEFAULT_HOT_DAYS
from herder.domain.images import REGISTRIES_VARIABLE, parse_registries
from herder.domain.jobs import DEFAULT_MAX_CHECKPOINT_MB
from herder.domain.sign_in import GroupGrant, parse_group_grants

if TYPE_CHECKING:
    from herder.store.cold.blobs import BlobStore
    from herder.store.cold.tier import ColdTier

DEFAULT_PORT = 8080
DEFAULT_HOME = Path(".herder")
DEFAULT_REGION = "default"  # a cell's when HERDER_REGION names none (as `herder edge --region`)
DEFAULT_LOST_WORKER_RETENTION_HOURS = 24.0  # a lost worker is listed this long, then forgotten


@dataclass(frozen=True)
class Settings:
    home: Path
    database_url: str
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    heartbeat_interval_seconds: float = 2.0
    heartbeat_timeout_seconds: float = 10.0  # silent this long, a worker is lost
    lost_worker_retention_hours: float = DEFAULT_LOST_WORKER_RETENTION_HOURS
    lease_seconds: float = 10.0  # a control loop's lease; a standby takes over after it
    # the dispatcher's partitions, each its own leased loop (docs/placement.md, "Partitions");
    # every scheduler of a cell must be given the same count; SQLite has one
    dispatch_partitions: int = 1
    allow_cron_seconds: bool = False  # accept a seconds field (fires faster than a minute)
    misfire_grace_seconds: float = 60.0  # a fire later than this was missed
    # Webhooks to loopback, private and link-local addresses: None decides by the store —
    # allowed on SQLite (one host, the embedded ``herder up``), refused on PostgreSQL.
    alert_private_targets: bool | None = None
    # how email and Slack alerts reach people: the SMTP relay, the dashboard they link to
    outbound: Outbound = field(default_factory=Outbound)
    # the blob store: PostgreSQL's history past the hot window (docs/history.md), uploaded
    # programs, and checkpoints when set
    cold_store: str | None = None  # file:///path or s3://…; None: the home's ``cold`` directory
    hot_days: int = DEFAULT_HOT_DAYS
    max_checkpoint_mb: int = DEFAULT_MAX_CHECKPOINT_MB  # the most a job's checkpoint_mb may be
    image_registries: tuple[str, ...] = ()  # where runtime image jobs may name images
    # the API serves HTTPS with these (PEM), both or neither: HERDER_TLS_CERT, HERDER_TLS_KEY
    tls_certificate: Path | None = None
    tls_key: Path | None = None
    # Stopping, the API answers /readyz 503 this long while it still serves, so a load
    # balancer's health checks take it out before it stops taking connections
    drain_seconds: float = 0.0
    # the cell this server is one of (docs/cells.md), named by its /metrics (herder_cell_info)
    cell: str | None = None  # HERDER_CELL, as the directory names it
    region: str = DEFAULT_REGION  # HERDER_REGION
    # OpenID Connect sign-in for people (docs/tenants.md "Single sign-on"); None: off
    oidc: OidcSettings | None = None

    @classmethod
    def from_environment(
        cls,
        *,
        home: Path | None = None,
        host: str | None = None,
        port: int | None = None,
        tls_certificate: Path | None = None,
        tls_key: Path | None = None,
        drain_seconds: float | None = None,
    ) -> Settings:
        home = (home or Path(os.environ.get("HERDER_HOME", DEFAULT_HOME))).absolute()
        url = os.environ.get("HERDER_DATABASE_URL") or sqlite_url(home / "herder.db")
        return cls(
            home=home,
            database_url=url,
            host=host or os.environ.get("HERDER_HOST", "127.0.0.1"),
            port=port or int(os.environ.get("HERDER_PORT", DEFAULT_PORT)),
            heartbeat_interval_seconds=float(os.environ.get("HERDER_HEARTBEAT_INTERVAL", "2")),
            heartbeat_timeout_seconds=float(os.environ.get("HERDER_HEARTBEAT_TIMEOUT", "10")),
            lost_worker_retention_hours=float(
                os.environ.get(
                    "HERDER_LOST_WORKER_RETENTION_HOURS", DEFAULT_LOST_WORKER_RETENTION_HOURS
                )
            ),
            lease_seconds=float(os.environ.get("HERDER_LEASE_SECONDS", "10")),
            dispatch_partitions=int(os.environ.get("HERDER_DISPATCH_PARTITIONS", "1")),
            allow_cron_seconds=os.environ.get("HERDER_CRON_SECONDS", "") in ("1", "true", "yes"),
            misfire_grace_seconds=float(os.environ.get("HERDER_MISFIRE_GRACE", "60")),
            alert_private_targets=_flag(os.environ.get("HERDER_ALERTS_PRIVATE_TARGETS")),
            outbound=outbound_from(os.environ),
            cold_store=os.environ.get("HERDER_COLD_STORE") or None,
            hot_days=int(os.environ.get("HERDER_HOT_DAYS", DEFAULT_HOT_DAYS)),
            max_checkpoint_mb=int(
                os.environ.get("HERDER_MAX_CHECKPOINT_MB", DEFAULT_MAX_CHECKPOINT_MB)
            ),
            image_registries=parse_registries(os.environ.get(REGISTRIES_VARIABLE, "")),
            tls_certificate=tls_certificate or _path(os.environ.get("HERDER_TLS_CERT")),
            tls_key=tls_key or _path(os.environ.get("HERDER_TLS_KEY")),
            drain_seconds=(
                drain_seconds
                if drain_seconds is not None
                else float(os.environ.get("HERDER_DRAIN_SECONDS", "0"))
            ),
            cell=_dns_label("HERDER_CELL"),
            region=_dns_label("HERDER_REGION") or DEFAULT_REGION,
            oidc=oidc_from(os.environ),
        )

    @property
    def allow_private_alert_targets(self) -> bool:
        if self.alert_private_targets is not None:
            return self.alert_private_targets
        return not self.database_url.startswith("postgres")

    def cold_tier(self) -> ColdTier | None:
        """PostgreSQL's cold tier; SQLite has none (its retention deletes runs)."""
        from herder.store.cold.tier import ColdTier

        if not self.database_url.startswith("postgres"):
            return None
        return ColdTier.at(self.blob_store_url, self.hot_days)

    def checkpoint_blobs(self) -> BlobStore | None:
        """Where new checkpoints' bytes go: the cold store when ``HERDER_COLD_STORE`` names
        one (either database), else None: the database."""
        from herder.store.cold.blobs import blob_store_at

        return blob_store_at(self.cold_store) if self.cold_store else None

    @property
    def blob_store_url(self) -> str:
        """The install's one blob store: ``HERDER_COLD_STORE``, else the home's ``cold``
        directory, so ``herder up`` needs nothing set."""
        return self.cold_store or (self.home / "cold").as_uri()

    def artifact_blobs(self) -> BlobStore:
        """Where uploaded programs' bytes go, on either database: the blob store."""
        from herder.store.cold.blobs import blob_store_at

        return blob_store_at(self.blob_store_url)

    @property
    def url(self) -> str:
        scheme = "https" if self.tls_certificate else "http"
        return f"{scheme}://{self.host}:{self.port}"


def outbound_from(environment: Mapping[str, str]) -> Outbound:
    """``HERDER_SMTP_URL``, ``HERDER_SMTP_FROM``, ``HERDER_SMTP_PLAIN_ALLOWED``,
    ``HERDER_DASHBOARD_URL`` and ``HERDER_ALERTS_CA_FILE`` (docs/configuration.md);
    ``ValueError`` naming the one at fault."""
    relay_url = environment.get("HERDER_SMTP_URL")
    dashboard_url = environment.get("HERDER_DASHBOARD_URL")
    relay = None
    if relay_url:
        allow_plain = _flag(environment.get("HERDER_SMTP_PLAIN_ALLOWED")) or False
        relay = parse_relay(relay_url, environment.get("HERDER_SMTP_FROM"), allow_plain=allow_plain)
    return Outbound(
        relay=relay,
        dashboard_url=parse_dashboard_url(dashboard_url) if dashboard_url else None,
        ca_file=_path(environment.get("HERDER_ALERTS_CA_FILE")),
    )


@dataclass(frozen=True)
class OidcSettings:
    """Sign-in through an OpenID Connect provider (docs/tenants.md "Single sign-on")."""

    issuer: str  # HERDER_OIDC_ISSUER: exactly as the provider's ID tokens name it
    client_id: str  # HERDER_OIDC_CLIENT_ID: the server's (confidential) client
    client_secret: str  # HERDER_OIDC_CLIENT_SECRET, or HERDER_OIDC_CLIENT_SECRET_FILE (0600)
    cli_client_id: str | None = None  # HERDER_OIDC_CLI_CLIENT_ID: `herder login`'s public client
    provider_name: str = "OpenID Connect"  # HERDER_OIDC_PROVIDER_NAME: on the sign-in button
    tenant_claim: str | None = None  # HERDER_OIDC_TENANT_CLAIM: maps by claims when set…
    role_claim: str | None = None  # HERDER_OIDC_ROLE_CLAIM (viewer when absent)
    groups_claim: str = "groups"  # HERDER_OIDC_GROUPS_CLAIM
    group_grants: tuple[GroupGrant, ...] = ()  # …else by HERDER_OIDC_GROUPS: group=tenant:role
    session_hours: float = 8.0  # HERDER_OIDC_SESSION_HOURS: how long a session admits
    # HERDER_OIDC_REDIRECT_BASE: this server's public address, for the callback's (else the
    # request's own, or HERDER_DASHBOARD_URL)
    redirect_base: str | None = None


def oidc_from(environment: Mapping[str, str]) -> OidcSettings | None:
    """None unless ``HERDER_OIDC_ISSUER`` is set; ``ValueError`` naming what is missing."""
    issuer = environment.get("HERDER_OIDC_ISSUER")
    if not issuer:
        return None
    client_id = environment.get("HERDER_OIDC_CLIENT_ID")
    secret = environment.get("HERDER_OIDC_CLIENT_SECRET")
    secret_file = _path(environment.get("HERDER_OIDC_CLIENT_SECRET_FILE"))
    if secret is None and secret_file is not None:
        if secret_file.stat().st_mode & 0o077:
            raise ValueError(f"HERDER_OIDC_CLIENT_SECRET_FILE {secret_file} must be 0600")
        secret = secret_file.read_text().strip()
    if not client_id or not secret:
        raise ValueError(
            "HERDER_OIDC_ISSUER needs HERDER_OIDC_CLIENT_ID and HERDER_OIDC_CLIENT_SECRET "
            "(or HERDER_OIDC_CLIENT_SECRET_FILE)"
        )
    tenant_claim = environment.get("HERDER_OIDC_TENANT_CLAIM") or None
    grants = parse_group_grants(environment.get("HERDER_OIDC_GROUPS", ""))
    if tenant_claim is None and not grants:
        raise ValueError("HERDER_OIDC_ISSUER needs HERDER_OIDC_TENANT_CLAIM or HERDER_OIDC_GROUPS")
    return OidcSettings(
        issuer=issuer,
        client_id=client_id,
        client_secret=secret,
        cli_client_id=environment.get("HERDER_OIDC_CLI_CLIENT_ID") or None,
        provider_name=environment.get("HERDER_OIDC_PROVIDER_NAME") or "OpenID Connect",
        tenant_claim=tenant_claim,
        role_claim=environment.get("HERDER_OIDC_ROLE_CLAIM") or None,
        groups_claim=environment.get("HERDER_OIDC_GROUPS_CLAIM") or "groups",
        group_grants=grants,
        session_hours=float(environment.get("HERDER_OIDC_SESSION_HOURS", "8")),
        redirect_base=environment.get("HERDER_OIDC_REDIRECT_BASE") or None,
    )


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


def _dns_label(variable: str) -> str | None:
    """A cell's or region's name from ``variable``: a DNS label, as the directory's."""
    value = os.environ.get(variable) or None
    if value is not None and not re.fullmatch(NAME_PATTERN, value):
        raise ValueError(f"{variable} is no DNS label (a-z, 0-9 and -, at most 63): {value[:80]!r}")
    return value


def _flag(value: str | None) -> bool | None:
    """``1``/``true``/``yes`` or ``0``/``false``/``no``; unset (or empty) is ``None``."""
    if not value:
        return None
    return value.strip().lower() in ("1", "true", "yes")


def _path(value: str | None) -> Path | None:
    return Path(value).absolute() if value else None
