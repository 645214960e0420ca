"""Which servers may run on a schema, so that old and new releases serve side by side while a
rolling upgrade moves through the API processes, schedulers and workers.

Every revision says whether it is ``online``: expand only — new tables, new columns that are
nullable or have a default, indexes built without blocking writes, rows rewritten in batches
— so the release before it still runs on the schema it makes, and no statement of it holds a
lock that blocks writers for more than a second. A revision that is not online (a column
renamed or dropped, a large table rewritten or indexed in one statement) is a floor: no
server older than it may run on the schema it makes. The migrating process records the
floor (``schema_compatibility``); a server that does not know the database's revision (a
newer release migrated it) serves on when it knows the floor, and refuses to start when not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from alembic.script import Script, ScriptDirectory


class SchemaTooNew(RuntimeError):
    """The database was migrated past what this server can run on."""


@dataclass(frozen=True)
class Verdict:
    migrate: bool  # False: the schema is newer than this server, which serves on it as it is
    explanation: str = ""


def is_online(revision: Script) -> bool:
    online = getattr(revision.module, "online", None)
    if not isinstance(online, bool):
        raise TypeError(f"migration {revision.revision} does not say whether it is online")
    return online


def oldest_server(script: ScriptDirectory, head: str) -> str:
    """The oldest revision whose servers may run on the schema ``head`` makes: the newest
    revision up to it that is not online (the first revision when all are)."""
    oldest = head
    for revision in script.iterate_revisions(head, "base"):
        oldest = revision.revision
        if not is_online(revision):
            break
    return oldest


def judge(script: ScriptDirectory, current: str | None, floor: str | None) -> Verdict:
    """Migrate a schema this server knows; serve on a newer one whose floor it knows; refuse
    one it cannot run on."""
    if current is None or _knows(script, current):
        return Verdict(migrate=True)
    head = script.get_current_head()
    if floor is not None and _knows(script, floor):
        return Verdict(
            migrate=False,
            explanation=(
                f"the database's schema is at revision {current}, newer than this server's "
                f"{head}; its migrations since {floor} are online, so this server runs on it "
                "beside the newer release"
            ),
        )
    needs = f"revision {floor} or newer" if floor is not None else f"revision {current}"
    raise SchemaTooNew(
        f"the database's schema is at revision {current}, which this server (schema {head}) "
        f"cannot run on: it needs a server of schema {needs}. Upgrade this server, or run "
        "the release that migrated the database"
    )


def _knows(script: ScriptDirectory, revision: str) -> bool:
    return revision in {known.revision for known in script.walk_revisions()}
