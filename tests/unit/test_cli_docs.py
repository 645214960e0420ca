"""docs/cli.md lists every command of ``herder``: a group or a command added without a row
there fails here."""

from __future__ import annotations

import re
from pathlib import Path

import herder.cli  # noqa: F401 (registers every group on the root app)
from herder.cli.common import app

CLI_DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_every_command_and_group_is_in_the_cli_docs() -> None:
    text = CLI_DOCS.read_text()
    names = [
        command.name or getattr(command.callback, "__name__", "").replace("_", "-")
        for command in app.registered_commands
    ]
    names += [group.name or "" for group in app.registered_groups]
    assert all(names)
    missing = [name for name in names if not re.search(rf"`{re.escape(name)}\b", text)]
    assert missing == []
