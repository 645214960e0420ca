"""A job's parameters: the values whoever starts a run may choose, each declared with a
type and, for text, allowed values or a pattern. They reach the attempt as environment
variables of their names (as a workflow's parameters do, in ``environment``'s form), so
that starting a run never means choosing the job's environment itself.

Patterns are RE2 (google-re2): matching takes time linear in the value whatever the
pattern, so a tenant's pattern cannot stall the API; and always the whole value.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from contextlib import suppress
from enum import StrEnum
from functools import lru_cache
from typing import Annotated, Any

import re2  # type: ignore[import-untyped]
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from herder.domain.errors import Invalid
from herder.domain.variables import changes_startup, variable_name_problem

MAX_PARAMETERS = 100
MAX_NAME_CHARS = 128
MAX_PATTERN_CHARS = 256
MAX_ENUM_VALUES = 256
MAX_VALUE_CHARS = 4096  # one parameter's value as its variable holds it
MAX_DESCRIPTION_CHARS = 1024
_INTEGER_BOUND = 2**63  # values fit a signed 64-bit integer, as most programs read them
_INTEGER_TEXT = re.compile(r"-?[0-9]{1,19}")  # ours, and linear: the stdlib's re will do


class ParameterType(StrEnum):
    STRING = "string"
    INTEGER = "integer"
    NUMBER = "number"
    BOOLEAN = "boolean"


def _check_name(name: str) -> str:
    problem = variable_name_problem(name)
    if problem is not None:
        raise ValueError(f"a parameter reaches the job as an environment variable: {problem}")
    return name


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a tenant's bad pattern is its 422, not the server's log


@lru_cache(maxsize=1024)
def _compiled(pattern: str) -> Any:
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as error:
        reason = error.args[0] if error.args else error
        if isinstance(reason, bytes):
            reason = reason.decode(errors="replace")
        raise ValueError(f"pattern {pattern!r} is not a valid RE2 expression: {reason}") from error


def typed_value(kind: ParameterType, value: object) -> bool | int | float | str:
    """``value`` as a value of ``kind``: its JSON type, or the text its variable would hold
    (``"5"`` for an integer: what a command line passes). Never a boolean for a number."""
    match kind:
        case ParameterType.BOOLEAN:
            if isinstance(value, bool):
                return value
            if value in ("true", "false"):
                return value == "true"
            raise ValueError("expected a boolean (true or false)")
        case ParameterType.INTEGER:
            number = value
            if isinstance(value, str) and _INTEGER_TEXT.fullmatch(value):
                number = int(value)
            if isinstance(number, int) and not isinstance(number, bool):
                if -_INTEGER_BOUND <= number < _INTEGER_BOUND:
                    return number
                raise ValueError("expected an integer that fits 64 bits")
            raise ValueError("expected an integer")
        case ParameterType.NUMBER:
            return _number(value)
        case ParameterType.STRING:
            if isinstance(value, str):
                return value
            raise ValueError("expected a string")


def _number(value: object) -> float | int:
    number = value
    if isinstance(value, str) and len(value) <= 64:
        with suppress(ValueError):
            number = float(value)
    if isinstance(number, bool) or not isinstance(number, int | float):
        raise ValueError("expected a number")
    if not math.isfinite(number):
        raise ValueError("expected a finite number")
    return number


class Parameter(BaseModel):
    """One declared parameter; without a default it must be given at every start. Fields
    are checked in order, so each check names its own field (``parameters.2.pattern``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(max_length=MAX_NAME_CHARS), AfterValidator(_check_name)]
    type: ParameterType = ParameterType.STRING
    description: Annotated[str, Field(max_length=MAX_DESCRIPTION_CHARS)] = ""
    pattern: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=MAX_PATTERN_CHARS,
            description="RE2 syntax; the whole value must match (strings only)",
        ),
    ] = None
    enum: Annotated[list[JsonValue] | None, Field(min_length=1, max_length=MAX_ENUM_VALUES)] = (
        Field(default=None, description="the only values allowed, each of the type")
    )
    default: JsonValue = Field(
        default=None, description="of the type; none: the parameter is required"
    )

    @property
    def required(self) -> bool:
        return self.default is None

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, pattern: str | None, info: ValidationInfo) -> str | None:
        if pattern is None:
            return None
        if info.data.get("type", ParameterType.STRING) is not ParameterType.STRING:
            raise ValueError("only a string parameter takes a pattern")
        _compiled(pattern)
        return pattern

    @field_validator("enum")
    @classmethod
    def _enum(cls, values: list[Any] | None, info: ValidationInfo) -> list[Any] | None:
        if values is None:
            return None
        checked = [_allowed(info.data, value) for value in values]
        if len({json.dumps(value) for value in checked}) < len(checked):
            raise ValueError("enum lists a value twice")
        return checked

    @field_validator("default")
    @classmethod
    def _default(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return None
        value = _allowed(info.data, value)
        enum = info.data.get("enum")
        if enum is not None and value not in enum:
            raise ValueError(f"the default {value!r} is not one of enum")
        return value

    def value_of(self, given: object) -> bool | int | float | str:
        """``given`` checked against this declaration (``ValueError`` saying why not)."""
        value = _fitting(self.type, self.pattern, given)
        if self.enum is not None and value not in self.enum:
            allowed = ", ".join(json.dumps(item) for item in self.enum[:20])
            raise ValueError(f"expected one of {allowed}")
        return value

    @property
    def constrained(self) -> bool:
        """Does the declaration bound what a caller may choose (more than any text)?"""
        return self.type is not ParameterType.STRING or bool(self.enum or self.pattern)


def _allowed(data: Mapping[str, Any], value: object) -> Any:
    """A value of the declaration so far (``data``, while it is validated)."""
    kind = data.get("type")
    if kind is None:  # the type itself was refused; that is the error to report
        return value
    return _fitting(kind, data.get("pattern"), value)


def _fitting(kind: ParameterType, pattern: str | None, given: object) -> bool | int | float | str:
    """``given`` as a value of ``kind`` that, as text, is not too long and matches whole."""
    value = typed_value(kind, given)
    if isinstance(value, str):
        if len(value) > MAX_VALUE_CHARS:
            raise ValueError(f"expected at most {MAX_VALUE_CHARS} characters")
        if pattern is not None and not _compiled(pattern).fullmatch(value):
            raise ValueError(f"{value[:100]!r} does not match the pattern {pattern!r}")
    return value


def refuse_name(parameters: Sequence[Parameter], position: int, message: str) -> ValidationError:
    """A refusal of one declaration's name, located at it (``parameters.2.name``) rather
    than at the whole list, for a rule the list (or the job) checks."""
    error = PydanticCustomError("parameter_name", message)
    detail = InitErrorDetails(type=error, loc=(position, "name"), input=parameters[position].name)
    return ValidationError.from_exception_data("parameters", [detail])


def _check_declarations(parameters: list[Parameter]) -> list[Parameter]:
    seen: dict[str, int] = {}
    for position, parameter in enumerate(parameters):
        if parameter.name in seen:
            raise refuse_name(
                parameters, position, f"parameter {seen[parameter.name]} has this name too"
            )
        seen[parameter.name] = position
        if changes_startup(parameter.name) and not parameter.constrained:
            raise refuse_name(
                parameters,
                position,
                f"{parameter.name} changes how a program starts (docs/isolation.md): declare "
                "it with an enum or a pattern, so that no caller can choose code to run",
            )
    return parameters


Parameters = Annotated[
    list[Parameter], Field(max_length=MAX_PARAMETERS), AfterValidator(_check_declarations)
]


def resolve(
    declared: Sequence[Parameter], given: Mapping[str, object], field: str = "params"
) -> dict[str, str]:
    """The environment the parameters give a run: each given value checked against its
    declaration, the defaults for the rest; ``Invalid`` naming ``params.NAME`` otherwise."""
    by_name = {parameter.name: parameter for parameter in declared}
    for name in given:
        if name not in by_name:
            names = ", ".join(sorted(by_name)[:50]) or "none"
            raise Invalid(
                f"{name[:128]!r} is not a parameter of this job (it declares: {names})",
                field=f"{field}.{name[:128]}",
            )
    values: dict[str, Any] = {}
    for parameter in declared:
        if parameter.name in given:
            try:
                values[parameter.name] = parameter.value_of(given[parameter.name])
            except ValueError as error:
                raise Invalid(
                    f"parameter {parameter.name}: {error}", field=f"{field}.{parameter.name}"
                ) from error
        elif parameter.default is not None:
            values[parameter.name] = parameter.default
        else:
            raise Invalid(
                f"parameter {parameter.name} is required (it has no default)",
                field=f"{field}.{parameter.name}",
            )
    return environment(values)


def environment(values: Mapping[str, Any]) -> dict[str, str]:
    """Each value as an environment variable of its name: text as it is, any other value as
    JSON (``true``, ``5``, ``2.5``)."""
    return {
        name: value if isinstance(value, str) else json.dumps(value)
        for name, value in values.items()
    }
