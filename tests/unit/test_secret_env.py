"""A secret's value on the worker side: in the attempt's environment, and in no repr or
error message on the way there."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from herder.domain.errors import Invalid
from herder.domain.jobs import JobSpec
from herder.domain.models import Assignment
from herder.domain.overrides import RunOverrides, apply_overrides
from herder.protocol import ClaimReply
from herder.worker.sandbox import attempt_environment
from herder.worker.workspace import build_plan

VALUE = "t0p-s3cret-value"
SPEC = JobSpec.model_validate(
    {"runtime": "shell", "command": "true", "env": {"PLAIN": "1"}, "secrets": {"TOKEN": "T"}}
)
ASSIGNMENT = Assignment(
    attempt_id="att_1", attempt=1, run_id="run_1", tenant_id="ten_1", idempotency_key=None,
    spec=SPEC, secret_env={"TOKEN": VALUE},
)  # fmt: skip


def test_the_attempts_environment_holds_the_value_under_its_variable() -> None:
    env = attempt_environment(ASSIGNMENT, Path("/work"), Path("/tmp"))
    assert (env["TOKEN"], env["PLAIN"], env["HERDER_RUN_ID"]) == (VALUE, "1", "run_1")


def test_an_env_override_of_a_secrets_variable_is_refused_naming_it() -> None:
    with pytest.raises(Invalid) as refused:
        apply_overrides(SPEC, RunOverrides(env={"TOKEN": "mine", "OTHER": "2"}))
    assert refused.value.field == "env.TOKEN"
    assert apply_overrides(SPEC, RunOverrides(env={"OTHER": "2"})).env == {
        "PLAIN": "1",
        "OTHER": "2",
    }


def test_no_repr_on_the_way_shows_the_value() -> None:
    env = attempt_environment(ASSIGNMENT, Path("/work"), Path("/tmp"))
    plan = build_plan(SPEC, Path("/work"), None, env, "python3", 10)
    assert VALUE not in repr(ASSIGNMENT) + str(ASSIGNMENT) + repr(plan)


@pytest.mark.parametrize(
    "assignments",
    [
        [{**ASSIGNMENT.model_dump(mode="json"), "attempt": "not a number"}],
        {**ASSIGNMENT.model_dump(mode="json")},  # not a list
    ],
)
def test_a_claim_answer_that_does_not_validate_does_not_repeat_the_value(
    assignments: object,
) -> None:
    with pytest.raises(ValidationError) as refused:
        ClaimReply.model_validate({"assignments": assignments, "cancel": [], "drop": []})
    assert VALUE not in str(refused.value)
