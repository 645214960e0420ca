"""A filter as a definition holds it (a trigger's, an event wait's): checked when it is
given, so every stored one parses (the language: ``domain.event_filters``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

from herder.domain.event_filters import MAX_SOURCE_CHARS, FilterError, parse


def _checked(source: str) -> str:
    try:
        parse(source)
    except FilterError as error:
        raise ValueError(str(error)) from None
    return source


FilterSource = Annotated[
    str,
    Field(max_length=MAX_SOURCE_CHARS, description="e.g. payload.ref == 'refs/heads/main'"),
    AfterValidator(_checked),
]
"""A filter as a definition holds it: checked when it is given, so every stored one parses."""
