"""The secrets keys of a process on the server side (``herder up``, ``server``,
``scheduler``, ``secret reencrypt``): where they come from, and a check at start against what
the store holds sealed; and the store such a process opens with them, migrated. Apart from
``server`` so that a scheduler loads no API."""

from __future__ import annotations

import logging

from herder.home import sqlite_path
from herder.keyring import KEY_ENV, KEY_FILE_ENV, Keyring, KeyringError, home_keyring, load_keyring
from herder.settings import Settings
from herder.store.migrations.compatibility import SchemaTooNew
from herder.store.store import Store

log = logging.getLogger("herder.server")


def server_keyring(settings: Settings) -> Keyring | None:
    """The secrets keys from the environment; on SQLite without them, the home's key file
    (made on the first start). A PostgreSQL server without them serves no secrets."""
    try:
        keyring = load_keyring()
        if keyring is None and sqlite_path(settings.database_url) is not None:
            keyring = home_keyring(settings.home)
    except KeyringError as error:
        raise SystemExit(str(error)) from error
    return keyring


def server_store(settings: Settings, keyring: Keyring | None) -> Store:
    """The store an API or scheduler process opens: one place for what its settings give it
    (the scheduler's had no checkpoint limit nor image registries of its own)."""
    return Store(
        settings.database_url,
        keyring=keyring,
        cold=settings.cold_tier(),
        checkpoint_blobs=settings.checkpoint_blobs(),
        artifact_blobs=settings.artifact_blobs(),
        max_checkpoint_mb=settings.max_checkpoint_mb,
        image_registries=settings.image_registries,
    )


def migrate(store: Store) -> None:
    """The schema brought to this release's head; a schema a newer release made that this
    one cannot run on stops the process, saying which release it needs."""
    try:
        store.migrate()
    except SchemaTooNew as error:
        raise SystemExit(str(error)) from error


def check_keyring(store: Store, keyring: Keyring | None) -> None:
    """Refuse to start when stored secrets are sealed with keys this server lacks: every
    attempt that needs one would fail."""
    missing = store.secrets.key_ids_in_use() - (keyring.key_ids if keyring else frozenset())
    if missing:
        raise SystemExit(
            f"secrets are stored sealed with key(s) {', '.join(sorted(missing))}, which this "
            f"server does not have: set {KEY_ENV} or {KEY_FILE_ENV} to the keys (the first "
            "the current one; keep old ones until `herder secret reencrypt` has run)"
        )
    check_channel_keys(store, keyring)


def check_channel_keys(store: Store, keyring: Keyring | None) -> None:
    """Seal the alert channels' secrets left in plain text from before 0016, and say which
    keys sealed channels need that this keyring lacks: their deliveries fail (the reason
    recorded on each) until it has them. A warning, not a refusal: only the sender needs them."""
    if keyring is not None:
        sealed = store.channel_secrets.seal_plain()
        if sealed:
            log.info(
                "sealed %d alert channel secret(s) with key %s", sealed, keyring.current_key_id
            )
    elif plain := store.channel_secrets.plain_count():
        log.warning(
            "%d alert channel secret(s) are still stored in plain text: set %s or %s and "
            "start again to seal them",
            plain, KEY_ENV, KEY_FILE_ENV,
        )  # fmt: skip
    held = keyring.key_ids if keyring else frozenset()
    _warn_unopened("inbound webhook", store.hooks.key_ids_in_use() - held, "are refused (503)")
    _warn_unopened("alert channel", store.channel_secrets.key_ids_in_use() - held, "fail")


def _warn_unopened(kind: str, missing: set[str], what: str) -> None:
    """Sealed secrets this process cannot open: a warning, as only their deliveries need them."""
    if missing:
        log.warning(
            "%s secrets are sealed with key(s) %s, which this process does not have: their "
            "deliveries %s until %s or %s holds them",
            kind, ", ".join(sorted(missing)), what, KEY_ENV, KEY_FILE_ENV,
        )  # fmt: skip
