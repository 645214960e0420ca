"""``--param-spec NAME[:TYPE][=DEFAULT]`` with ``--param-enum`` and ``--param-pattern``: what
each text declares, and which option a refusal names (docs/cli.md#parameters)."""

from __future__ import annotations

from typing import Any

import pytest
import typer

from herder.cli.parameter_options import declared_parameters, spec_fields


@pytest.mark.parametrize(
    ("text", "fields"),
    [
        ("day", {"name": "day"}),
        ("day=", {"name": "day", "default": ""}),
        ("dataset=daily", {"name": "dataset", "default": "daily"}),
        ("limit:integer=5", {"name": "limit", "type": "integer", "default": "5"}),
        ("ratio:number", {"name": "ratio", "type": "number"}),
        ("url=http://a/b?c=d:e", {"name": "url", "default": "http://a/b?c=d:e"}),
    ],
)
def test_a_spec_is_a_name_a_type_and_the_default_as_given(
    text: str, fields: dict[str, Any]
) -> None:
    assert spec_fields(text) == fields


@pytest.mark.parametrize(
    ("specs", "enums", "patterns", "declared"),
    [
        (["mode=fast"], ["mode=fast,full"], [],
         [{"name": "mode", "enum": ["fast", "full"], "default": "fast"}]),
        (["day"], [], ["day=^[0-9]{8}$"], [{"name": "day", "pattern": "^[0-9]{8}$"}]),
        (["eq"], [], ["eq=^a=b,c$"], [{"name": "eq", "pattern": "^a=b,c$"}]),
        (["level:integer=2"], ["level=1,2,3"], [],
         [{"name": "level", "type": "integer", "enum": [1, 2, 3], "default": 2}]),
        (["dry:boolean=false"], [], [], [{"name": "dry", "type": "boolean", "default": False}]),
    ],
)  # fmt: skip
def test_the_declarations_are_typed_by_the_domain(
    specs: list[str], enums: list[str], patterns: list[str], declared: list[dict[str, Any]]
) -> None:
    assert declared_parameters(specs, enums, patterns) == declared


@pytest.mark.parametrize(
    ("specs", "enums", "patterns", "option", "words"),
    [
        ([":string"], [], [], "--param-spec", "names no parameter"),
        (["n:text"], [], [], "--param-spec", "type 'text' is none of"),
        (["n:integer=x"], [], [], "--param-spec", "n: expected an integer"),
        (["n", "n"], [], [], "--param-spec", "has this name too"),
        (["m"], ["m=a,a"], [], "--param-enum", "enum lists a value twice"),
        (["m"], ["m"], [], "--param-enum", "must look like NAME="),
        (["m"], ["m=a", "m=b"], [], "--param-enum", "m is given twice"),
        (["m"], [], ["x=a"], "--param-pattern", "x is not declared"),
        (["m:integer"], [], ["m=1"], "--param-pattern", "only a string parameter"),
        (["m"], [], ["m=("], "--param-pattern", "not a valid RE2 expression"),
    ],
)  # fmt: skip
def test_a_refusal_names_the_option_that_gave_the_field(
    specs: list[str], enums: list[str], patterns: list[str], option: str, words: str
) -> None:
    with pytest.raises(typer.BadParameter) as refused:
        declared_parameters(specs, enums, patterns)
    assert refused.value.param_hint == option
    assert words in refused.value.message
