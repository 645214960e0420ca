"""Job specs: defaults, the rules per runtime, and run overrides."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from herder.domain.jobs import JobSpec, Priority, Resources
from herder.domain.overrides import RunOverrides, apply_overrides

SHA = "0" * 64


def test_defaults_are_those_documented() -> None:
    spec = JobSpec(runtime="shell", command="true")
    assert spec.timeout_seconds == 3600
    assert spec.priority is Priority.MEDIUM
    assert spec.resources == Resources(cpu=1, memory_mb=256, gpus=0)
    assert spec.network is False
    assert spec.stop_grace_seconds == 30


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"runtime": "shell"}, "needs a command"),
        ({"runtime": "shell", "command": "  "}, "needs a command"),
        ({"runtime": "shell", "command": "x", "artifact": SHA}, "takes no artifact"),
        ({"runtime": "python"}, "needs an artifact"),
        ({"runtime": "python", "artifact": SHA, "command": "x"}, "leave command out"),
        ({"runtime": "executable"}, "needs an artifact"),
        ({"runtime": "archive", "artifact": SHA}, "needs a command"),
        ({"runtime": "shell", "command": "x", "timeout_seconds": 86401}, "24 h"),
        ({"runtime": "shell", "command": "x", "timeout_seconds": 0}, "greater than or equal"),
        ({"runtime": "shell", "command": "x", "stop_grace_seconds": -1}, "greater than or equal"),
        ({"runtime": "shell", "command": "x", "stop_grace_seconds": 601}, "less than or equal"),
        ({"runtime": "shell", "command": "x", "resources": {"cpu": 0.0001}}, "millicore"),
        ({"runtime": "shell", "command": "x", "labels": {"bad key!": "v"}}, "label key"),
    ],
)
def test_invalid_specs_say_what_is_wrong(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        JobSpec.model_validate(fields)


def test_a_day_is_the_longest_timeout() -> None:
    assert JobSpec(runtime="shell", command="x", timeout_seconds=86400).timeout_seconds == 86400


@pytest.mark.parametrize("grace", [0, 600])
def test_a_stop_grace_may_be_none_at_all_or_ten_minutes(grace: int) -> None:
    spec = JobSpec(runtime="shell", command="x", stop_grace_seconds=grace)
    assert spec.stop_grace_seconds == grace


def test_cpu_is_kept_in_whole_millicores() -> None:
    assert Resources(cpu=0.0504).cpu_milli == 50


def test_priorities_rank_high_over_medium_over_low() -> None:
    assert Priority.HIGH.rank > Priority.MEDIUM.rank > Priority.LOW.rank


def test_overrides_replace_args_and_merge_env() -> None:
    spec = JobSpec(runtime="shell", command="x", args=["a"], env={"A": "1", "B": "2"})
    run = apply_overrides(spec, RunOverrides(args=["b", "c"], env={"B": "3"}))
    assert run.args == ["b", "c"]
    assert run.env == {"A": "1", "B": "3"}
    assert apply_overrides(spec, RunOverrides()) == spec


@pytest.mark.parametrize(
    ("fields", "requires"),
    [
        ({"runtime": "shell", "command": "true"}, {}),
        ({"runtime": "shell", "command": "true", "requires": {"zone": "b"}}, {"zone": "b"}),
        ({"runtime": "image", "artifact": SHA}, {"isolation": "sandbox"}),
        (
            {"runtime": "image", "artifact": SHA, "requires": {"isolation": "none", "zone": "b"}},
            {"isolation": "sandbox", "zone": "b"},
        ),
    ],
)
def test_an_image_job_is_placed_only_on_a_sandboxed_worker(
    fields: dict[str, object], requires: dict[str, str]
) -> None:
    assert JobSpec.model_validate(fields).placement_requires == requires
