"""Text with placeholders that a run's values fill: ``{params.NAME}`` (and, for a limit's key,
``{env.NAME}``). A limit's key template (``limits``) and an approval's message
(``workflows.waits``) are read by the same rules, so one syntax serves both."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping

from pydantic import JsonValue

PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_NAMED = re.compile(r"^(params|env)\.([A-Za-z_][A-Za-z0-9_]{0,127})$")
PLACEHOLDER_RULE = "a placeholder is {params.NAME} or {env.NAME}"

Sources = Mapping[str, Mapping[str, JsonValue]]  # "params" (and "env") → name → value


def placeholders(template: str) -> list[tuple[str, str]]:
    """The ``(source, name)`` of each placeholder of ``template``, in order; ``ValueError``
    for anything else in braces or a brace left open."""
    found = []
    for match in PLACEHOLDER.finditer(template):
        named = _NAMED.match(match.group(1))
        if named is None:
            raise ValueError(f"{match.group(0)[:64]!r} is not a placeholder: {PLACEHOLDER_RULE}")
        found.append((named.group(1), named.group(2)))
    if "{" in PLACEHOLDER.sub("", template) or "}" in PLACEHOLDER.sub("", template):
        raise ValueError(f"a brace is left open: {PLACEHOLDER_RULE}")
    return found


def as_text(value: JsonValue) -> str:
    """A value as a placeholder shows it: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def fill(template: str, sources: Sources, missing: Callable[[str], str]) -> str:
    """``template`` with each placeholder replaced by its value; ``missing`` answers for one
    that names no value (given its text, ``params.NAME``): it raises, or says what to show."""

    def value(match: re.Match[str]) -> str:
        source, _, name = match.group(1).partition(".")
        if name not in sources.get(source, {}):
            return missing(match.group(1))
        return as_text(sources[source][name])

    return PLACEHOLDER.sub(value, template)
