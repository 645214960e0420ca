"""An approval's message shows the run's parameters as ``{params.NAME}`` — the placeholders
of a limit's key — checked when the workflow is written and filled for the approvers."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import JsonValue

from herder.domain.errors import Invalid
from herder.domain.workflows.spec import WorkflowSpec, check_messages
from herder.domain.workflows.waits import ApprovalSpec, approval_message


def reviewed(message: str, params: dict[str, Any]) -> WorkflowSpec:
    return WorkflowSpec.model_validate(
        {"params": params, "tasks": [{"name": "review", "approval": {"message": message}}]}
    )


@pytest.mark.parametrize(
    ("message", "params", "shown"),
    [
        ("Publish the model trained on {params.dataset}?", {"dataset": "s3://ml/latest"},
         "Publish the model trained on s3://ml/latest?"),
        ("{params.epochs} epochs on {params.files}", {"epochs": 20, "files": ["a", "b"]},
         '20 epochs on ["a", "b"]'),
        ("no placeholder", {}, "no placeholder"),
        ("{params.gone} stays as written", {}, "{params.gone} stays as written"),
    ],
)  # fmt: skip
def test_the_message_is_filled_with_the_runs_parameters(
    message: str, params: dict[str, JsonValue], shown: str
) -> None:
    assert approval_message(ApprovalSpec(message=message), params) == shown


def test_no_message_shows_none() -> None:
    assert approval_message(ApprovalSpec(), {"dataset": "x"}) is None


@pytest.mark.parametrize(
    ("message", "why"),
    [
        ("trained on {dataset}?", "'{dataset}' names no parameter"),
        ("trained on {params.other}?", "'{params.other}' names no parameter"),
        ("trained on {env.HOME}?", "'{env.HOME}' names no parameter"),
        ("a brace { left open", "a brace is left open"),
    ],
)
def test_a_message_naming_no_declared_parameter_is_refused_naming_the_field(
    message: str, why: str
) -> None:
    with pytest.raises(Invalid) as refused:
        check_messages(reviewed(message, {"dataset": "s3://ml/latest"}))
    assert refused.value.field == "tasks.0.approval.message"
    assert why in refused.value.detail
    assert "{params.NAME} (declared: dataset)" in refused.value.detail


def test_a_message_of_declared_parameters_is_accepted() -> None:
    check_messages(reviewed("trained on {params.dataset}", {"dataset": "s3://ml/latest"}))
