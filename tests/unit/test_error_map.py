"""Domain errors know nothing of HTTP; the API gives each class one status and title."""

from __future__ import annotations

import inspect

from herder.api.errors import PROBLEMS, status_and_title
from herder.domain import errors
from herder.domain.errors import (
    HerderError,
    Invalid,
    TemporarilyUnavailable,
    TenantMoving,
    Unavailable,
)


def _error_classes() -> list[type[HerderError]]:
    return [
        kind
        for _, kind in inspect.getmembers(errors, inspect.isclass)
        if issubclass(kind, HerderError) and kind is not HerderError
    ]


def test_every_domain_error_has_its_own_problem_status() -> None:
    """Each kind of error its own status; a narrower kind (``TemporarilyUnavailable``, a 503
    that says when to retry, and ``TenantMoving``, one that names the cell) answers as the
    kind it narrows."""
    classes = _error_classes()
    kinds = [kind for kind in classes if kind.__mro__[1] is HerderError]
    assert set(kinds) == set(PROBLEMS)
    statuses = [status_and_title(kind)[0] for kind in kinds]
    assert len(set(statuses)) == len(statuses)
    assert all(400 <= status < 600 and status != 500 for status in statuses)
    narrower = [kind for kind in classes if kind not in kinds]
    assert narrower == [TemporarilyUnavailable, TenantMoving]
    for kind in narrower:
        assert status_and_title(kind) == status_and_title(Unavailable)


def test_domain_errors_carry_no_http_status() -> None:
    for kind in [HerderError, *_error_classes()]:
        assert not hasattr(kind, "status")
        assert not hasattr(kind, "title")


def test_an_unmapped_error_is_our_bug_and_a_subclass_maps_as_its_parent() -> None:
    class Surprise(HerderError):
        pass

    class Narrower(Invalid):
        pass

    assert status_and_title(Surprise) == (500, "Internal error")
    assert status_and_title(Narrower) == (422, "Invalid request")


def test_invalid_names_its_field_as_request_validation_does() -> None:
    assert [(e.field, e.message) for e in Invalid("bad", field="cron").errors] == [("cron", "bad")]
    assert Invalid("no field").errors == []
