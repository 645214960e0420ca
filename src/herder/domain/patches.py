"""A PATCH's merge: the given fields over the stored ones, checked as a whole spec."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from herder.domain.errors import Invalid

Spec = TypeVar("Spec", bound=BaseModel)


def check_fields(changes: Mapping[str, object], fields: Collection[str]) -> None:
    """``Invalid`` naming the first field a PATCH may not change."""
    unknown = set(changes) - set(fields)
    if unknown:
        raise Invalid(f"unknown field(s): {', '.join(sorted(unknown))}", field=min(unknown))


def patched(spec: type[Spec], stored: Mapping[str, Any], changes: Mapping[str, object]) -> Spec:
    """The spec with ``changes`` over ``stored`` (``null`` clears an optional field)."""
    try:
        return spec.model_validate({**stored, **changes})
    except ValidationError as error:
        raise Invalid.from_validation(error) from error
