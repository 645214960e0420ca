"""Alert channels' signing secrets, sealed with the server's keyring (``herder.keyring``)
and bound to their tenant and channel: the only place their ciphertext is read or written.

Channels made before 0016 keep their secret in ``plain_secret`` until a server or scheduler
with a keyring starts: it seals them and clears the column (``seal_plain``). Until then the
sender signs with the plain one, so an upgrade never stops deliveries.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, func, or_, select, update

from herder.domain.errors import Unavailable
from herder.keyring import Keyring, KeyringError, Sealed, channel_associated_data
from herder.store.database import Database
from herder.store.schema import alert_channels
from herder.store.secrets import NO_KEY


class ChannelSecrets:
    def __init__(self, database: Database, keyring: Keyring | None) -> None:
        self._db = database
        self._keyring = keyring

    def sealed_columns(self, tenant_id: str, channel_id: str, secret: str) -> dict[str, Any]:
        """The columns that hold ``secret`` for the channel (and no plain text)."""
        if self._keyring is None:
            raise Unavailable(NO_KEY)
        sealed = self._keyring.seal(secret.encode(), channel_associated_data(tenant_id, channel_id))
        return {"key_id": sealed.key_id, "nonce": sealed.nonce, "ciphertext": sealed.ciphertext,
                "plain_secret": None}  # fmt: skip

    def open(self, row: Any, *, channel_id: str | None = None) -> str:
        """The secret of a channel row (``tenant_id``, its id — ``channel_id`` when the row
        names it so — and the sealed columns); raises ``KeyringError`` saying why it does not
        open, never with a value in it."""
        if row.plain_secret is not None:
            return str(row.plain_secret)
        if self._keyring is None:
            raise KeyringError(f"the channel's secret is sealed with key {row.key_id}; {NO_KEY}")
        sealed = Sealed(row.key_id, bytes(row.nonce), bytes(row.ciphertext))
        associated = channel_associated_data(row.tenant_id, channel_id or row.id)
        return self._keyring.open(sealed, associated).decode()

    def key_ids_in_use(self) -> set[str]:
        with self._db.read() as connection:
            return set(
                connection.execute(
                    select(alert_channels.c.key_id)
                    .where(alert_channels.c.key_id.is_not(None))
                    .distinct()
                ).scalars()
            )

    def plain_count(self) -> int:
        with self._db.read() as connection:
            return int(
                connection.execute(
                    select(func.count()).where(alert_channels.c.plain_secret.is_not(None))
                ).scalar_one()
            )

    def seal_plain(self) -> int:
        """Seal the secrets left in plain text from before 0016; how many were."""
        return self._seal_again(alert_channels.c.plain_secret.is_not(None))

    def reencrypt(self) -> int:
        """Seal every secret not sealed with the current key (or not sealed at all) again
        with it, after a key rotation; how many were."""
        keyring = self._require_keyring()
        return self._seal_again(
            or_(
                alert_channels.c.plain_secret.is_not(None),
                alert_channels.c.key_id != keyring.current_key_id,
            )
        )

    def _seal_again(self, condition: ColumnElement[bool], batch: int = 500) -> int:
        done = 0
        while True:
            with self._db.write() as connection:
                rows = connection.execute(
                    select(alert_channels).where(condition).limit(batch).with_for_update()
                ).all()
                for row in rows:
                    try:
                        secret = self.open(row)
                    except KeyringError as error:
                        where = f"alert channel {row.id} of {row.tenant_id}"
                        raise Unavailable(f"{where}: {error}") from error
                    connection.execute(
                        update(alert_channels)
                        .where(alert_channels.c.id == row.id)
                        .values(**self.sealed_columns(row.tenant_id, row.id, secret))
                    )
            done += len(rows)
            if len(rows) < batch:
                return done

    def _require_keyring(self) -> Keyring:
        if self._keyring is None:
            raise Unavailable(NO_KEY)
        return self._keyring
