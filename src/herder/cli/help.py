"""``herder --help`` by use: the root's commands in panels, running work first, and every
help text as prose. A docstring's line breaks are the source's, not the reader's: Typer
keeps them in a command list and in every paragraph but the first, so they are joined here
and the terminal wraps the words at its own width."""

from __future__ import annotations

import inspect

import typer
from typer._click import Context
from typer.core import TyperGroup
from typer.models import DefaultPlaceholder

PANELS: dict[str, tuple[str, ...]] = {
    "Run work": ("run", "job", "workflow", "schedule", "queue", "top"),
    "Events": ("event", "trigger", "hook"),
    "Definitions as files": ("apply", "export"),
    "Capacity and flow control": ("pool", "limit", "forecast", "usage", "budgets"),
    "Alerts and audit": ("alert", "audit"),
    "Tenants, keys and secrets": ("tenant", "key", "secret", "cell"),
    "Signing in": ("login", "logout", "whoami", "session"),
    "Run the system": ("up", "server", "scheduler", "worker", "autoscaler", "system", "edge"),
}
_ORDER = [name for names in PANELS.values() for name in names]


def prose(text: str) -> str:
    """``text`` with each paragraph on one line (paragraphs stay apart)."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in one.splitlines()) for one in paragraphs)


class CommandsByUse(TyperGroup):
    """The root group: its commands listed in the panels' order, not as registered."""

    def list_commands(self, ctx: Context) -> list[str]:
        listed = super().list_commands(ctx)
        return sorted(listed, key=lambda name: _ORDER.index(name) if name in _ORDER else 999)


def arrange(app: typer.Typer, *, root: bool = True) -> None:
    """Each of the root's commands in its panel; every command's and group's help as prose."""
    panel_of = {name: panel for panel, names in PANELS.items() for name in names}
    for command in app.registered_commands:
        name = command.name or getattr(command.callback, "__name__", "").replace("_", "-")
        command.help = prose(command.help or inspect.getdoc(command.callback) or "")
        if root:
            command.rich_help_panel = panel_of.get(name)
    if app.registered_callback is not None:  # a group run as a command too (worker)
        callback = app.registered_callback
        callback.help = prose(callback.help or inspect.getdoc(callback.callback) or "")
    if isinstance(app.info.help, str) and not isinstance(app.info.help, DefaultPlaceholder):
        app.info.help = prose(app.info.help)
    for group in app.registered_groups:
        if root:
            group.rich_help_panel = panel_of.get(group.name or "")
        if group.typer_instance is not None:
            arrange(group.typer_instance, root=False)
