"""The trigger filter language: what matches, what a parameter reads, and what is refused
(docs/events.md)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from herder.domain.event_filters import (
    MAX_DEPTH,
    MAX_NODES,
    MAX_SOURCE_CHARS,
    Constant,
    FilterError,
    Path,
    matches,
    parse,
    parse_value,
    value,
)

PUSH: dict[str, Any] = {
    "name": "github.push",
    "source": "hook_1",
    "payload": {
        "ref": "refs/heads/main",
        "forced": False,
        "size": 3,
        "ratio": 0.5,
        "repository": {"full_name": "acme/api", "topics": ["ml", "prod"]},
        "commits": [{"id": "a1", "message": "fix [skip ci]"}, {"id": "b2"}],
        "weird key": 7,
    },
}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("payload.ref == 'refs/heads/main'", True),
        ('payload.ref == "refs/heads/dev"', False),
        ("payload.ref != 'refs/heads/dev'", True),
        ("name == 'github.push' and payload.size >= 3", True),
        ("payload.size > 3 or payload.ratio < 1", True),
        ("not payload.forced", True),
        ("payload.forced", False),
        ("payload.size == 3.0", True),
        ("payload.forced == 0", False),  # booleans are not numbers
        ("payload.size > '2'", False),  # no ordering across types
        ("payload.ref > 'refs/heads/a'", True),
        ("'prod' in payload.repository.topics", True),
        ("'dev' not in payload.repository.topics", True),
        ("'[skip ci]' in payload.commits[0].message", True),
        ("payload.commits[-1].id == 'b2'", True),
        ("payload.commits[5].id == null", True),  # beyond the list: null
        ("payload.missing.deeper == null", True),
        ("payload['weird key'] == 7", True),
        ("payload.ref starts_with 'refs/tags/'", False),
        ("payload.ref ends_with '/main'", True),
        ("payload.repository.full_name in ['acme/api', 'acme/web']", True),
        ("payload.size in []", False),
        ("(payload.size == 1 or payload.size == 3) and not (payload.ratio > 0.9)", True),
        ("payload.repository == payload.repository", True),  # deep equality
        ("payload.commits == [1, 2]", False),
        ("payload.ref", False),  # a lone operand holds only when it is true
        ("true", True),
    ],
)
def test_a_filter_matches_the_event_it_describes(source: str, expected: bool) -> None:
    assert matches(parse(source), PUSH) is expected


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("", "empty"),
        ("payload.ref ==", "expected a path"),
        ("payload.ref = 'x'", "unexpected character '='"),
        ("(payload.ref == 'x'", "expected ')'"),
        ("payload.ref == 'x' payload", "expected and, or or the end"),
        ("payload.", "expected a name after '.'"),
        ("payload[1.5]", "expected an integer or a string"),
        ("__import__('os').system('id')", "expected and, or or the end"),
        ("payload.ref == 1e999", "out of range"),
        ("'unterminated", "unexpected character"),
        ("[payload.ref]", "expected a path, a string"),  # a list holds literals only
    ],
)
def test_a_broken_filter_says_what_and_where(source: str, message: str) -> None:
    with pytest.raises(FilterError, match=re.escape(message)):
        parse(source)


def test_a_filter_is_bounded_in_length_parts_and_depth() -> None:
    with pytest.raises(FilterError, match="longer than"):
        parse("payload.a == 1 and " * 200 + "true")
    assert len("payload.a == 1 and " * 200) > MAX_SOURCE_CHARS
    with pytest.raises(FilterError, match="nested deeper"):
        parse("(" * (MAX_DEPTH + 1) + "true" + ")" * (MAX_DEPTH + 1))
    with pytest.raises(FilterError, match="nested deeper"):
        parse("not " * (MAX_DEPTH + 1) + "true")
    with pytest.raises(FilterError, match="parts"):
        parse(" or ".join(["a"] * (MAX_NODES + 1)))


def test_a_parameter_is_one_path_or_literal() -> None:
    ref = parse_value("payload.repository.full_name")
    assert isinstance(ref, Path)
    assert value(ref, PUSH) == "acme/api"
    assert parse_value("'fast'") == Constant("fast")
    with pytest.raises(FilterError, match="not a condition"):
        parse_value("payload.size > 1")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(st.text(max_size=60), json_values)
def test_any_text_either_parses_or_is_refused_and_never_raises_on_any_payload(
    source: str, payload: Any
) -> None:
    try:
        node = parse(source)
    except FilterError:
        return
    assert isinstance(matches(node, {"name": "e", "payload": payload}), bool)
