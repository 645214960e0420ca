"""Names that place work: labels (a worker's, a job's requirements, a pool's selector) and
pool names as jobs, runs, budgets and tenants name them."""

from __future__ import annotations

import re

_LABEL_KEY = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._/-]{0,62}[A-Za-z0-9])?$")
_POOL_NAME = re.compile(r"^[a-z0-9]([a-z0-9._-]{0,62}[a-z0-9])?$")
MAX_LABEL_VALUE_CHARS = 256


def check_labels(labels: dict[str, str]) -> dict[str, str]:
    for key, value in labels.items():
        if not _LABEL_KEY.match(key):
            raise ValueError(
                f"label key {key!r} must be 1-64 letters, digits, '.', '_', '-' or '/'"
            )
        if len(value) > MAX_LABEL_VALUE_CHARS:
            raise ValueError(f"label {key!r}: value is longer than 256 characters")
    return labels


def check_pool_reference(name: str | None) -> str | None:
    """A pool's name as a job or run names it: whether the tenant may use it is the store's
    to say (a 422 naming ``pool``)."""
    if name is not None and not _POOL_NAME.match(name):
        raise ValueError(
            "a pool name is 1-64 lower-case letters, digits, '.', '_' or '-', starting and "
            "ending with a letter or digit"
        )
    return name
