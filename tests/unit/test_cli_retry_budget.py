"""``HERDER_RETRY_SECONDS``: how long the CLI tries a call again; a bad value said plainly."""

from __future__ import annotations

import pytest
import typer

from herder.cli.common import retry_budget
from herder.client.retries import BUDGET_SECONDS


def test_unset_it_is_the_clients_budget_and_zero_never_retries() -> None:
    assert retry_budget({}) == BUDGET_SECONDS
    assert retry_budget({"HERDER_RETRY_SECONDS": "0"}) == 0
    assert retry_budget({"HERDER_RETRY_SECONDS": "7.5"}) == 7.5


@pytest.mark.parametrize("given", ["-1", "3601", "soon", "nan", "inf", ""])
def test_a_value_out_of_range_or_no_number_is_refused(
    given: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(typer.Exit):
        retry_budget({"HERDER_RETRY_SECONDS": given})
    assert "HERDER_RETRY_SECONDS must be seconds from 0 to 3600" in capsys.readouterr().err
