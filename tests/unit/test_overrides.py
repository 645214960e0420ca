"""Overrides cannot break a job's spec: every override passes the job's own rules, and a
valid spec with valid overrides applied is still a valid spec (what a worker is handed)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from herder.domain.jobs import MAX_ARGS, JobSpec
from herder.domain.overrides import RunOverrides, apply_overrides
from herder.domain.variables import changes_startup

# Valid override names: not Herder's own, and no variable an interpreter or loader reads at
# start (an override may not set one its job does not: ``domain/variables.py``).
names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True).filter(
    lambda name: not name.startswith("HERDER_") and not changes_startup(name)
)
envs = st.dictionaries(names, st.text(max_size=20), max_size=20)
arg_lists = st.lists(st.text(max_size=20), max_size=MAX_ARGS)


@settings(max_examples=50, deadline=None)
@given(job_args=arg_lists, job_env=envs, run_args=st.none() | arg_lists, run_env=st.none() | envs)
def test_a_valid_spec_with_valid_overrides_stays_valid(
    job_args: list[str],
    job_env: dict[str, str],
    run_args: list[str] | None,
    run_env: dict[str, str] | None,
) -> None:
    spec = JobSpec(runtime="shell", command="true", args=job_args, env=job_env)
    applied = apply_overrides(spec, RunOverrides(args=run_args, env=run_env))
    assert JobSpec.model_validate(applied.model_dump()) == applied


@pytest.mark.parametrize(
    "overrides",
    [
        {"args": ["x"] * (MAX_ARGS + 1)},
        {"args": ["x" * 65537]},
        {"env": {"A": "x" * 65537}},
        {"env": {"1A": "x"}},
        {"env": {"HERDER_RANK": "1"}},
    ],
)
def test_an_override_a_job_would_refuse_is_refused(overrides: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        JobSpec.model_validate({"runtime": "shell", "command": "true", **overrides})
    with pytest.raises(ValidationError):
        RunOverrides.model_validate(overrides)
