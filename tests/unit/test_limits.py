"""Limits' vocabulary (docs/flow-control.md): what a limit must bound, what a key template may
name, and how a run's key is rendered and bounded."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from herder.domain.errors import Invalid
from herder.domain.limits import (
    MAX_KEY_CHARS,
    LimitReference,
    LimitSpec,
    placeholders,
    render_key,
)


@pytest.mark.parametrize(
    ("spec", "refused"),
    [
        ({"max_running": 1}, None),
        ({"rate": {"count": 10, "period_seconds": 60}}, None),
        ({"debounce": {"window_seconds": 5}}, None),
        ({"max_running": 2, "strategy": "drop"}, None),
        ({}, "bounds something"),
        ({"description": "nothing"}, "bounds something"),
        ({"max_running": 0}, "max_running"),
        ({"max_running": -3}, "max_running"),
        ({"rate": {"count": 0, "period_seconds": 60}}, "rate.count"),
        ({"rate": {"count": -1, "period_seconds": 60}}, "rate.count"),
        ({"rate": {"count": 1, "period_seconds": -60}}, "rate.period_seconds"),
        ({"debounce": {"window_seconds": 0}}, "debounce.window_seconds"),
        (
            {"rate": {"count": 1, "period_seconds": 1}, "strategy": "cancel_newest"},
            "needs max_running",
        ),
    ],
)
def test_a_limit_bounds_something_by_more_than_zero(
    spec: dict[str, Any], refused: str | None
) -> None:
    if refused is None:
        LimitSpec.model_validate(spec)
        return
    with pytest.raises(ValidationError) as error:
        LimitSpec.model_validate(spec)
    said = str(error.value)
    assert refused in said or refused in ".".join(
        str(part) for item in error.value.errors() for part in item["loc"]
    )


@pytest.mark.parametrize(
    ("template", "named"),
    [
        ("acme", []),
        ("{params.account}", [("params", "account")]),
        ("{env.ACCOUNT_ID}", [("env", "ACCOUNT_ID")]),
        ("tenant-{params.region}/{env.ZONE}", [("params", "region"), ("env", "ZONE")]),
    ],
)
def test_a_template_names_parameters_and_environment_only(
    template: str, named: list[tuple[str, str]]
) -> None:
    assert placeholders(template) == named
    assert LimitReference(limit="partner-api", key=template).key == template


@pytest.mark.parametrize(
    "template",
    [
        "{tenant.id}",
        "{secrets.TOKEN}",
        "{params}",
        "{params.}",
        "{params.a.b}",
        "{env.A-B}",
        "{}",
        "{params.account",
        "params.account}",
        "{{params.account}}",
        "a\x00b",
        "line\nbreak",
        "right\u202eto-left",
        "zero\u200bwidth",
        "{" * 200,
    ],
)
def test_anything_else_in_braces_is_refused_naming_the_key(template: str) -> None:
    with pytest.raises(ValidationError) as error:
        LimitReference(limit="partner-api", key=template)
    assert [item["loc"] for item in error.value.errors()] == [("key",)]


def test_a_huge_template_is_refused() -> None:
    with pytest.raises(ValidationError):
        LimitReference(limit="partner-api", key="{params.a}" * 1000)


@pytest.mark.parametrize(
    ("template", "params", "env", "key"),
    [
        ("{params.account}", {"account": "acme"}, {}, "acme"),
        ("{params.account}", {"account": 42}, {}, "42"),
        ("{params.on}", {"on": True}, {}, "true"),
        ("{env.REGION}-{params.account}", {"account": "acme"}, {"REGION": "eu"}, "eu-acme"),
        ("fixed", {}, {}, "fixed"),
        ("{params.account}", {"account": "acme corp"}, {}, "acme corp"),  # spaces are text
        ("{params.account}", {"account": "zürich-東京"}, {}, "zürich-東京"),
    ],
)
def test_a_key_is_rendered_from_the_runs_values(
    template: str, params: dict[str, Any], env: dict[str, str], key: str
) -> None:
    assert render_key(template, params, env) == key


@pytest.mark.parametrize(
    ("template", "params", "env", "said"),
    [
        ("{params.account}", {}, {"account": "x"}, "limits[0].key: params.account is not set"),
        ("{env.ACCOUNT_ID}", {"ACCOUNT_ID": "x"}, {}, "limits[0].key: env.ACCOUNT_ID is not set"),
        ("{params.account}", {"account": "x" * (MAX_KEY_CHARS + 1)}, {}, "longer than 128"),
        ("{params.account}", {"account": "x" * 1_000_000}, {}, "longer than 128"),
        ("{params.account}", {"account": "a\x00b"}, {}, "has U+0000, a control, format"),
        ("{params.account}", {"account": "a\nb"}, {}, "has U+000A"),
        ("{params.account}", {"account": "a\x7fb"}, {}, "has U+007F"),
        ("{params.account}", {"account": "a\u0085b"}, {}, "has U+0085"),  # next line (C1)
        ("{params.account}", {"account": "a\u202eb"}, {}, "has U+202E"),  # right-to-left
        ("{params.account}", {"account": "a\u2028b"}, {}, "has U+2028"),  # line separator
        ("{params.account}", {"account": "a\u200bb"}, {}, "has U+200B"),  # zero width
        ("{params.account}", {"account": "a\ud800b"}, {}, "has U+D800"),  # a lone surrogate
        ("{params.account}", {"account": "a\U000e0001b"}, {}, "has U+E0001"),  # a tag
        ("{params.account}", {"account": ""}, {}, "renders empty"),
    ],
)
def test_a_key_that_cannot_be_rendered_names_the_field_and_why(
    template: str, params: dict[str, Any], env: dict[str, str], said: str
) -> None:
    with pytest.raises(Invalid) as error:
        render_key(template, params, env, "limits[0].key")
    assert said in error.value.detail
    assert error.value.field == "limits[0].key"


@given(st.dictionaries(st.from_regex(r"[a-z]{1,8}", fullmatch=True), st.text(max_size=200)))
def test_a_rendered_key_is_bounded_or_refused(params: dict[str, str]) -> None:
    template = "-".join(f"{{params.{name}}}" for name in sorted(params)) or "k"
    try:
        key = render_key(template, params, {})
    except Invalid as error:
        refused = error
    else:
        assert 0 < len(key) <= MAX_KEY_CHARS
        assert not any(ord(char) < 32 or ord(char) == 127 for char in key)
        return
    assert refused.field == "key"


@given(st.text(max_size=300))
def test_a_template_is_accepted_or_refused_never_crashes(template: str) -> None:
    try:
        named = placeholders(template)
    except ValueError:
        return
    assert all(source in ("params", "env") for source, _ in named)
