"""What ``herder_database_statements_total`` files each statement under."""

from __future__ import annotations

import pytest

from herder.store.statements import kind_of


@pytest.mark.parametrize(
    ("statement", "kind"),
    [
        ("SELECT runs.id FROM runs", "select"),
        ("  (SELECT 1) UNION (SELECT 2)", "select"),
        ("\n\tinsert INTO runs (id) VALUES (%(id)s)", "insert"),
        ("UPDATE runs SET state = %(state)s", "update"),
        ("DELETE FROM leases", "delete"),
        (
            "WITH moved AS (UPDATE runs SET state = 'queued' RETURNING id) SELECT id FROM moved",
            "other",
        ),
        ("NOTIFY herder_work", "other"),
        ("", "other"),
    ],
)
def test_a_statement_is_counted_by_its_first_word(statement: str, kind: str) -> None:
    assert kind_of(statement) == kind
