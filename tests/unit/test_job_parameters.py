"""Job parameters and run overrides, as tables: what a declaration, a value and an env
override may be, and which variables change how a program starts."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from herder.domain.errors import Invalid
from herder.domain.jobs import JobSpec
from herder.domain.overrides import RunOverrides, apply_overrides
from herder.domain.parameters import Parameter, ParameterType, resolve, typed_value
from herder.domain.variables import changes_startup, variable_name_problem


@pytest.mark.parametrize(
    ("kind", "given", "expected"),
    [
        (ParameterType.STRING, "x", "x"),
        (ParameterType.STRING, "", ""),
        (ParameterType.INTEGER, 5, 5),
        (ParameterType.INTEGER, "5", 5),
        (ParameterType.INTEGER, "-12", -12),
        (ParameterType.INTEGER, 2**63 - 1, 2**63 - 1),
        (ParameterType.NUMBER, 2.5, 2.5),
        (ParameterType.NUMBER, 3, 3),
        (ParameterType.NUMBER, "2.5", 2.5),
        (ParameterType.BOOLEAN, True, True),
        (ParameterType.BOOLEAN, "false", False),
    ],
)
def test_a_value_of_its_type_or_its_text_is_taken(
    kind: ParameterType, given: object, expected: object
) -> None:
    assert typed_value(kind, given) == expected


@pytest.mark.parametrize(
    ("kind", "given"),
    [
        (ParameterType.STRING, 5),
        (ParameterType.STRING, None),
        (ParameterType.STRING, ["x"]),
        (ParameterType.INTEGER, True),  # bool is an int to Python, never to a parameter
        (ParameterType.INTEGER, 1.0),
        (ParameterType.INTEGER, "1.0"),
        (ParameterType.INTEGER, " 1"),
        (ParameterType.INTEGER, 2**63),
        (ParameterType.INTEGER, "9" * 30),
        (ParameterType.NUMBER, False),
        (ParameterType.NUMBER, float("nan")),
        (ParameterType.NUMBER, "inf"),
        (ParameterType.NUMBER, "x"),
        (ParameterType.NUMBER, {"a": 1}),
        (ParameterType.BOOLEAN, 1),
        (ParameterType.BOOLEAN, "True"),
        (ParameterType.BOOLEAN, "yes"),
    ],
)
def test_a_value_of_another_type_is_refused(kind: ParameterType, given: object) -> None:
    with pytest.raises(ValueError, match="expected"):
        typed_value(kind, given)


@pytest.mark.parametrize(
    ("declaration", "field"),
    [
        ({"name": "9LIVES"}, ("name",)),
        ({"name": "A-B"}, ("name",)),
        ({"name": "A\x00"}, ("name",)),
        ({"name": "HERDER_X", "default": "x"}, ("name",)),
        ({"name": "A" * 129}, ("name",)),
        ({"name": "A", "type": "list"}, ("type",)),
        ({"name": "A", "pattern": ""}, ("pattern",)),
        ({"name": "A", "pattern": "[a-"}, ("pattern",)),
        ({"name": "A", "pattern": "(?<=a)b"}, ("pattern",)),  # lookbehind: not RE2
        ({"name": "A", "pattern": "x" * 257}, ("pattern",)),
        ({"name": "A", "type": "boolean", "pattern": "true"}, ("pattern",)),
        ({"name": "A", "enum": []}, ("enum",)),
        ({"name": "A", "enum": ["a"] * 257}, ("enum",)),
        ({"name": "A", "enum": ["a", "a"]}, ("enum",)),
        ({"name": "A", "type": "number", "enum": [1, "two"]}, ("enum",)),
        ({"name": "A", "pattern": "[a-z]+", "enum": ["ok", "NO"]}, ("enum",)),
        ({"name": "A", "default": 1}, ("default",)),
        ({"name": "A", "type": "integer", "default": False}, ("default",)),
        ({"name": "A", "enum": ["a"], "default": "b"}, ("default",)),
        ({"name": "A", "pattern": "[0-9]+", "default": "1a"}, ("default",)),
        ({"name": "A", "default": "x" * 4097}, ("default",)),
        ({"name": "A", "description": "x" * 1025}, ("description",)),
        ({"name": "A", "secret": True}, ("secret",)),
    ],
)
def test_a_declaration_is_refused_at_the_field_that_breaks_a_rule(
    declaration: dict[str, Any], field: tuple[str, ...]
) -> None:
    with pytest.raises(ValidationError) as refused:
        Parameter.model_validate(declaration)
    assert field in [error["loc"][: len(field)] for error in refused.value.errors()]


SPEC = {"runtime": "shell", "command": "true", "env": {"PLAIN": "1"}, "secrets": {"T": "tok"}}


@pytest.mark.parametrize(
    ("parameters", "loc"),
    [
        ([{"name": "A", "default": "1"}, {"name": "A", "default": "2"}], ("parameters", 1, "name")),
        ([{"name": "PLAIN", "default": "1"}], ("parameters", 0, "name")),
        ([{"name": "T", "default": "1"}], ("parameters", 0, "name")),
        ([{"name": "LD_PRELOAD", "default": "/x.so"}], ("parameters", 0, "name")),
        ([{"name": "BROWSER", "default": "firefox"}], ("parameters", 0, "name")),
        ([{"name": f"P{index}"} for index in range(101)], ("parameters",)),
    ],
)
def test_a_jobs_parameters_are_refused_where_they_clash(
    parameters: list[dict[str, Any]], loc: tuple[object, ...]
) -> None:
    with pytest.raises(ValidationError) as refused:
        JobSpec.model_validate({**SPEC, "parameters": parameters})
    assert [error["loc"] for error in refused.value.errors()] == [loc]


def test_a_startup_variable_may_be_a_parameter_when_constrained() -> None:
    spec = JobSpec.model_validate(
        {**SPEC, "parameters": [
            {"name": "PYTHONHASHSEED", "type": "integer", "default": 0},
            {"name": "LD_BIND_NOW", "enum": ["1"], "default": "1"},
            {"name": "TMPDIR", "pattern": "/tmp/[a-z]+", "default": "/tmp/a"},
        ]}
    )  # fmt: skip
    assert apply_overrides(spec, RunOverrides(params={"TMPDIR": "/tmp/b"})).env == {
        "PLAIN": "1", "PYTHONHASHSEED": "0", "LD_BIND_NOW": "1", "TMPDIR": "/tmp/b",
    }  # fmt: skip


DECLARED = [
    Parameter(name="REGION", enum=["eu", "us"], default="eu"),
    Parameter(name="COUNT", type=ParameterType.INTEGER, default=1),
    Parameter(name="DAY", pattern=r"\d{4}-\d{2}-\d{2}"),
]


@pytest.mark.parametrize(
    ("given", "env"),
    [
        ({"DAY": "2026-01-02"}, {"REGION": "eu", "COUNT": "1", "DAY": "2026-01-02"}),
        ({"DAY": "2026-01-02", "COUNT": "7"}, {"REGION": "eu", "COUNT": "7", "DAY": "2026-01-02"}),
        (
            {"DAY": "2026-01-02", "REGION": "us"},
            {"REGION": "us", "COUNT": "1", "DAY": "2026-01-02"},
        ),
    ],
)
def test_values_are_checked_and_defaults_filled(given: dict[str, Any], env: dict[str, str]) -> None:
    assert resolve(DECLARED, given) == env


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ({}, "params.DAY"),
        ({"DAY": "2026-01-02", "region": "eu"}, "params.region"),
        ({"DAY": "2026-01-02x"}, "params.DAY"),  # the whole value must match
        ({"DAY": "x2026-01-02"}, "params.DAY"),
        ({"DAY": "2026-01-02", "REGION": "EU"}, "params.REGION"),
        ({"DAY": "2026-01-02", "COUNT": True}, "params.COUNT"),
        ({"DAY": "2026-01-02", "COUNT": None}, "params.COUNT"),
    ],
)
def test_a_value_that_does_not_fit_names_its_parameter(given: dict[str, Any], field: str) -> None:
    with pytest.raises(Invalid) as refused:
        resolve(DECLARED, given)
    assert refused.value.field == field


JOB = JobSpec.model_validate(
    {**SPEC, "env": {"PLAIN": "1", "LD_LIBRARY_PATH": "/opt"},
     "parameters": [{"name": "MODE", "enum": ["a", "b"], "default": "a"}]}
)  # fmt: skip


@pytest.mark.parametrize(
    ("env", "fields"),
    [
        ({"T": "mine"}, ["env.T"]),  # a secret's variable, for every role
        ({"MODE": "c"}, ["env.MODE"]),  # a parameter's: set it as one
        ({"PYTHONWARNINGS": "ignore::antigravity.x", "BROWSER": "sh"},
         ["env.PYTHONWARNINGS", "env.BROWSER"]),
        ({"LD_PRELOAD": "/x.so"}, ["env.LD_PRELOAD"]),
        ({"Ld_Preload": "/x.so"}, ["env.Ld_Preload"]),
        ({"PATH": "/tmp"}, ["env.PATH"]),
        ({"GIT_SSH_COMMAND": "sh"}, ["env.GIT_SSH_COMMAND"]),
    ],
)  # fmt: skip
def test_an_env_override_no_run_may_make_names_each_field(
    env: dict[str, str], fields: list[str]
) -> None:
    with pytest.raises(Invalid) as refused:
        apply_overrides(JOB, RunOverrides(env=env))
    assert [error.field for error in refused.value.errors] == fields


def test_an_env_override_of_a_startup_variable_its_job_sets_applies() -> None:
    spec = apply_overrides(JOB, RunOverrides(env={"LD_LIBRARY_PATH": "/opt2", "X": "1"}))
    assert spec.env == {"PLAIN": "1", "LD_LIBRARY_PATH": "/opt2", "MODE": "a", "X": "1"}
    assert spec.parameters == []


@pytest.mark.parametrize(
    "name",
    ["LD_PRELOAD", "LD_AUDIT", "ld_library_path", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS",
     "PS4", "PROMPT_COMMAND", "IFS", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONWARNINGS",
     "PYTHONHOME", "PYTHONINSPECT", "PYTHONBREAKPOINT", "BROWSER", "PERL5OPT", "PERL5LIB",
     "PERLLIB", "PERL5DB", "RUBYOPT", "RUBYLIB", "NODE_OPTIONS", "NODE_PATH",
     "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH", "GCONV_PATH",
     "MALLOC_CHECK_", "GLIBC_TUNABLES", "LUA_INIT", "LUA_INIT_5_4", "R_PROFILE",
     "R_PROFILE_USER", "PHPRC", "PATH", "HOME", "TMPDIR", "OPENSSL_CONF", "GIT_CONFIG_COUNT",
     "DOTNET_STARTUP_HOOKS", "npm_config_script_shell"],
)  # fmt: skip
def test_these_change_how_a_program_starts(name: str) -> None:
    assert changes_startup(name)


@pytest.mark.parametrize("name", ["DAY", "REGION", "VERBOSE", "LANG", "TZ", "ENVIRONMENT"])
def test_these_do_not(name: str) -> None:
    assert not changes_startup(name)


@pytest.mark.parametrize(
    ("name", "ok"), [("A", True), ("_a1", True), ("1A", False), ("A B", False), ("HERDER_X", False)]
)
def test_an_environment_variable_name_is_an_identifier_outside_herders_prefix(
    name: str, ok: bool
) -> None:
    assert (variable_name_problem(name) is None) is ok
