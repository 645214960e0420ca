"""Every migration says whether it is online, and why, in the words its docstring uses
(``store/migrations/compatibility.py``): the rolling upgrade's floor is computed from it."""

from __future__ import annotations

from alembic.config import Config
from alembic.script import ScriptDirectory

from herder.store import migrations


def revisions() -> list[object]:
    config = Config()
    config.set_main_option("script_location", str(migrations._HERE))
    return list(ScriptDirectory.from_config(config).walk_revisions())


def test_every_revision_says_whether_it_is_online_and_why() -> None:
    unsaid = []
    for revision in revisions():
        module = revision.module  # type: ignore[attr-defined]
        online = getattr(module, "online", None)
        said = "\nOnline: " if online else "\nNot online: "
        if not isinstance(online, bool) or said not in (module.__doc__ or ""):
            unsaid.append(revision.revision)  # type: ignore[attr-defined]
    assert not unsaid, f"revisions that do not say whether they are online, and why: {unsaid}"
