"""A tenant's secrets, sealed: the only place their ciphertext is read or written.

A value is sealed with the server's keyring (``herder.keyring``) bound to its tenant, name
and version, and opened in only one place: ``reveal``, inside the claim that hands an
attempt to its worker — so the value an attempt gets is the one current when it started.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, exc, func, insert, select, update

from herder.clock import Clock
from herder.domain import secrets as domain_secrets
from herder.domain.errors import Conflict, HerderError, Invalid, Unavailable
from herder.domain.listings import PageRequest
from herder.domain.models import Page
from herder.domain.secrets import Secret, check_secret_name, secret_bytes, secret_name_problem
from herder.keyring import KEY_ENV, KEY_FILE_ENV, Keyring, KeyringError, Sealed, associated_data
from herder.store.database import Database
from herder.store.named import NamedRows
from herder.store.pagination import check_limit, encode_cursor
from herder.store.schema import secrets

NO_KEY = (
    f"this server has no secrets key: set {KEY_ENV} (base64 of 32 random bytes) or "
    f"{KEY_FILE_ENV} (a 0600 file of such keys, one a line)"
)


class SecretUnavailable(HerderError):
    """A secret an attempt needs cannot be given to it: gone, or it does not open here."""


class _CreatedMeanwhile(Exception):
    """Another call created the secret between this one's read and its insert."""


class SecretRepository:
    def __init__(self, database: Database, clock: Clock, keyring: Keyring | None) -> None:
        self._db = database
        self._clock = clock
        self._keyring = keyring

    def put(self, tenant_id: str, name: str, value: str) -> tuple[Secret, bool]:
        """Create the secret, or give it a new value (its version goes up by one); whether it
        was created. Two first PUTs of one name at once: the later one replaces."""
        check_secret_name(name)
        plaintext = secret_bytes(value)
        keyring = self._require_keyring()
        try:
            return self._put(keyring, tenant_id, name, plaintext)
        except _CreatedMeanwhile:
            return self._put(keyring, tenant_id, name, plaintext)

    def _put(
        self, keyring: Keyring, tenant_id: str, name: str, plaintext: bytes
    ) -> tuple[Secret, bool]:
        now = self._clock.now()
        with self._db.write() as connection:
            row = connection.execute(
                select(secrets.c.version, secrets.c.created_at)
                .where(secrets.c.tenant_id == tenant_id, secrets.c.name == name)
                .with_for_update()
            ).first()
            version = row.version + 1 if row else 1
            sealed = keyring.seal(plaintext, associated_data(tenant_id, name, version))
            columns = {
                "version": version, "key_id": sealed.key_id, "nonce": sealed.nonce,
                "ciphertext": sealed.ciphertext, "updated_at": now,
            }  # fmt: skip
            if row is None:
                _check_room(connection, tenant_id)
                try:
                    connection.execute(
                        insert(secrets).values(
                            tenant_id=tenant_id, name=name, created_at=now, **columns
                        )
                    )
                except exc.IntegrityError as error:
                    raise _CreatedMeanwhile from error
            else:
                connection.execute(
                    update(secrets)
                    .where(secrets.c.tenant_id == tenant_id, secrets.c.name == name)
                    .values(**columns)
                )
        created_at = row.created_at if row else now
        return Secret(name=name, version=version, created_at=created_at, updated_at=now), not row

    def get(self, tenant_id: str, name: str) -> Secret:
        with self._db.read() as connection:
            return ROWS.get(connection, tenant_id, name)

    def list(self, tenant_id: str, *, page: PageRequest = PageRequest()) -> Page[Secret]:
        """By name; never a value."""
        check_limit(page.limit)
        query = select(*_METADATA).where(secrets.c.tenant_id == tenant_id)
        if page.cursor:
            query = query.where(secrets.c.name > _after_name(page.cursor))
        with self._db.read() as connection:
            rows = connection.execute(query.order_by(secrets.c.name).limit(page.limit + 1)).all()
        more = len(rows) > page.limit
        return Page(
            items=[_secret(row) for row in rows[: page.limit]],
            next_cursor=encode_cursor(rows[page.limit - 1].name) if more else None,
        )

    def delete(self, tenant_id: str, name: str) -> None:
        """Gone at once: an attempt that needs it afterwards fails, saying so."""
        with self._db.write() as connection:
            ROWS.delete(connection, tenant_id, name)

    def key_ids_in_use(self) -> set[str]:
        """The keys the stored secrets are sealed with: the server needs each in its keyring."""
        with self._db.read() as connection:
            return set(connection.execute(select(secrets.c.key_id).distinct()).scalars())

    def reencrypt(self, batch: int = 500) -> int:
        """Seal every secret not sealed with the current key again with it (after a key
        rotation, so the old key can be dropped); how many were."""
        keyring = self._require_keyring()
        done = 0
        while True:
            with self._db.write() as connection:
                rows = connection.execute(
                    select(secrets)
                    .where(secrets.c.key_id != keyring.current_key_id)
                    .limit(batch)
                    .with_for_update()
                ).all()
                for row in rows:
                    associated = associated_data(row.tenant_id, row.name, row.version)
                    try:
                        plaintext = keyring.open(_sealed(row), associated)
                    except KeyringError as error:
                        where = f"secret {row.name} of {row.tenant_id}"
                        raise Unavailable(f"{where}: {error}") from error
                    sealed = keyring.seal(plaintext, associated)
                    connection.execute(
                        update(secrets)
                        .where(secrets.c.tenant_id == row.tenant_id, secrets.c.name == row.name)
                        .values(
                            key_id=sealed.key_id, nonce=sealed.nonce, ciphertext=sealed.ciphertext
                        )
                    )
            done += len(rows)
            if len(rows) < batch:
                return done

    def check_references(
        self, connection: Connection, tenant_id: str, references: Mapping[str, str]
    ) -> None:
        """Every secret a job names exists (in the caller's transaction), else 422 naming the
        variable that names a missing one."""
        if not references:
            return
        found = _existing(connection, tenant_id, set(references.values()))
        for variable, name in sorted(references.items()):
            if name not in found:
                raise Invalid(
                    f"secret {name} not found; create it with PUT /v1/secrets/{name} first",
                    field=f"secrets.{variable}",
                )

    def reveal(
        self, connection: Connection, tenant_id: str, references: Mapping[str, str]
    ) -> dict[str, str]:
        """The values of the secrets a run names, by environment variable, read in the
        caller's transaction (the claim's). Raises ``SecretUnavailable``, naming the secret
        and never a value, when one is gone or does not open."""
        if not references:
            return {}
        if self._keyring is None:
            raise SecretUnavailable(NO_KEY)
        rows = {
            row.name: row
            for row in connection.execute(
                select(secrets).where(
                    secrets.c.tenant_id == tenant_id,
                    secrets.c.name.in_(set(references.values())),
                )
            )
        }
        values = {}
        for variable, name in sorted(references.items()):
            row = rows.get(name)
            if row is None:
                raise SecretUnavailable(f"secret {name} (for {variable}) no longer exists")
            associated = associated_data(tenant_id, name, row.version)
            try:
                values[variable] = self._keyring.open(_sealed(row), associated).decode()
            except KeyringError as error:
                raise SecretUnavailable(f"secret {name} (for {variable}): {error}") from error
        return values

    def _require_keyring(self) -> Keyring:
        if self._keyring is None:
            raise Unavailable(NO_KEY)
        return self._keyring


_METADATA = (secrets.c.name, secrets.c.version, secrets.c.created_at, secrets.c.updated_at)


def _secret(row: Any) -> Secret:
    return Secret(
        name=row.name, version=row.version, created_at=row.created_at, updated_at=row.updated_at
    )


# Found by name only, read without its ciphertext (its key, the tenant and name, kept).
ROWS = NamedRows(
    secrets, "secret", _secret, found_by=("name",), columns=(secrets.c.tenant_id, *_METADATA)
)


def _sealed(row: Any) -> Sealed:
    return Sealed(row.key_id, bytes(row.nonce), bytes(row.ciphertext))


def _existing(connection: Connection, tenant_id: str, names: set[str]) -> set[str]:
    return set(
        connection.execute(
            select(secrets.c.name).where(
                secrets.c.tenant_id == tenant_id, secrets.c.name.in_(names)
            )
        ).scalars()
    )


def _check_room(connection: Connection, tenant_id: str) -> None:
    held = connection.execute(
        select(func.count()).select_from(secrets).where(secrets.c.tenant_id == tenant_id)
    ).scalar_one()
    if held >= domain_secrets.MAX_SECRETS_PER_TENANT:
        raise Conflict(
            f"the tenant holds {held} secrets, the most it may; delete one to add another"
        )


def _after_name(cursor: str) -> str:
    try:
        name = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        name = ""
    if secret_name_problem(name) is not None:
        raise Invalid("cursor is not one returned by this listing", field="cursor")
    return name
