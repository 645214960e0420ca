"""A job's parameters declared on the command line (``job create``, ``job update``)::

    --param-spec NAME[:TYPE][=DEFAULT]   TYPE string (when left out), integer, number or
                                         boolean; no =DEFAULT: given at every start
    --param-enum NAME=VALUE,VALUE,…      the only values allowed
    --param-pattern NAME=RE2             what the whole value must match (a string's)

A name holds neither ``:`` nor ``=`` (it is an environment variable's), so what follows the
first ``=`` is the default, the values or the pattern exactly as given: a pattern needs no
escaping. Every declaration is checked by the domain's own (``domain/parameters.py``) before
anything is sent, and a refusal names the option that gave the field.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from pydantic import TypeAdapter, ValidationError

from herder.domain.parameters import Parameter, Parameters, ParameterType

ParamSpecOption = Annotated[
    list[str],
    typer.Option(
        "--param-spec",
        help="declare a parameter a run may set with --param, as NAME, NAME:TYPE or "
        "NAME:TYPE=DEFAULT; TYPE is string (the default), integer, number or boolean, and "
        "without a default every start must give it; repeatable (docs/cli.md)",
    ),
]
ParamEnumOption = Annotated[
    list[str],
    typer.Option(
        "--param-enum",
        help="NAME=VALUE,VALUE,…: the only values a declared parameter may take",
    ),
]
ParamPatternOption = Annotated[
    list[str],
    typer.Option(
        "--param-pattern",
        help="NAME=RE2: a pattern the whole value of a declared string parameter must match",
    ),
]

_CHECKED = TypeAdapter(Parameters)
_OPTION_OF_FIELD = {"enum": "--param-enum", "pattern": "--param-pattern"}


def spec_fields(text: str) -> dict[str, Any]:
    """``NAME[:TYPE][=DEFAULT]`` as a declaration's fields, the default as the text given
    (the declaration types it)."""
    head, equals, default = text.partition("=")
    name, colon, kind = head.partition(":")
    if not name:
        raise typer.BadParameter(f"{text!r} names no parameter", param_hint="--param-spec")
    fields: dict[str, Any] = {"name": name}
    if colon:
        if kind not in set(ParameterType):
            types = ", ".join(ParameterType)
            raise typer.BadParameter(
                f"{name}: type {kind!r} is none of {types}", param_hint="--param-spec"
            )
        fields["type"] = kind
    if equals:
        fields["default"] = default
    return fields


def _by_name(items: list[str], option: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in items:
        name, equals, value = item.partition("=")
        if not equals or not name:
            raise typer.BadParameter(f"{item!r} must look like NAME=…", param_hint=option)
        if name in found:
            raise typer.BadParameter(f"{name} is given twice", param_hint=option)
        found[name] = value
    return found


def declared_parameters(
    specs: list[str], enums: list[str], patterns: list[str]
) -> list[dict[str, Any]]:
    """The ``parameters`` field the options declare, checked as the server checks it."""
    declarations = [spec_fields(text) for text in specs]
    by_name = {fields["name"]: fields for fields in declarations}
    values = {name: text.split(",") for name, text in _by_name(enums, "--param-enum").items()}
    for option, field, given in (
        ("--param-enum", "enum", values),
        ("--param-pattern", "pattern", _by_name(patterns, "--param-pattern")),
    ):
        for name, value in given.items():
            if name not in by_name:
                raise typer.BadParameter(
                    f"{name} is not declared: add --param-spec {name}[:TYPE]", param_hint=option
                )
            by_name[name][field] = value
    try:
        checked = _CHECKED.validate_python(declarations)
    except ValidationError as error:
        first = error.errors()[0]
        position, refused = (first["loc"] + ("", ""))[:2]
        name = declarations[position]["name"] if isinstance(position, int) else ""
        message = first["msg"].removeprefix("Value error, ")
        option = _OPTION_OF_FIELD.get(str(refused), "--param-spec")
        raise typer.BadParameter(f"{name}: {message}", param_hint=option) from None
    return [_sent(parameter) for parameter in checked]


def _sent(parameter: Parameter) -> dict[str, Any]:
    return parameter.model_dump(mode="json", exclude_defaults=True)
