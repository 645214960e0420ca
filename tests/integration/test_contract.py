"""The API keeps the contract its OpenAPI document states: schemathesis, every check
(``--checks all``), positive and negative examples for every operation, as an admin (and
as a worker for the worker protocol), on both stores; no server error, no undocumented
status, content type, header or body.

One test per store walks every operation (a fresh PostgreSQL database per operation would
cost more than the examples); a failure lists every operation that failed. The cases are drawn
once a session, by the first store's test, and sent to each store: drawing them is two thirds
of a store's CPU, and the second store's own draw bought next to nothing: derandomized, it drew
the same 994 cases but 23, most of those differing by one string Hypothesis takes from the
constants of the modules loaded by then.

Whether an operation has any input that breaks its schema depends on its definition alone:
schemathesis breaks only the locations it finds negatable (a path or header parameter with a
constraint that reaches the wire, a query with any parameter, a body schema it can negate),
and with none it generates every location positive and rejects each case. Drawing cases to
learn that cost Hypothesis about 460 rejected cases an operation (56 of 129, two thirds of the
test's CPU); the test asks schemathesis's own choice of locations instead (``_negatable``).
"""

from __future__ import annotations

import os
from typing import Any, NoReturn, cast

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from hypothesis.strategies import DrawFn
from schemathesis import GenerationMode
from schemathesis.checks import CHECKS, load_all_checks
from schemathesis.core.parameters import ParameterLocation
from schemathesis.core.result import Err
from schemathesis.specs.openapi._hypothesis import _draw_negated_locations

from tests.integration.conftest import Api

# Bounded so both stores take about half a minute; HERDER_CONTRACT_EXAMPLES=100 for a deep run.
EXAMPLES_PER_MODE = int(os.environ.get("HERDER_CONTRACT_EXAMPLES", "5"))

# Valid per the schema yet refused by a rule JSON Schema cannot state (a cron's syntax, a
# runtime that needs a command, an artifact that must exist): 422 is an acceptable answer
# to positive data. A body past the size limit (a workflow's thousand tasks, each with its
# env, can be generated that big) is refused with 413, valid or not. Every other check keeps
# its defaults.
REFUSALS = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429"]
CONFIG = schemathesis.config.SchemathesisConfig.from_dict(
    {
        # Each call carries its credential (``_headers``): the declared bearer schemes are not
        # generated, or negated, as if they were parameters (a missing key is test_auth's).
        "generation": {"with-security-parameters": False},
        "checks": {
            "positive_data_acceptance": {
                "expected-statuses": ["2xx", "401", "403", "404", "409", "413", "422", "429"]
            },
            "negative_data_rejection": {"expected-statuses": [*REFUSALS, "5xx"]},
        },
    }
)


class _Negatable(Exception):
    """Raised by ``_negatable``'s draw: schemathesis draws only among negatable locations."""


def _negatable(operation: Any) -> bool:
    """Whether schemathesis finds any location of ``operation`` to break in negative mode:
    where it finds none, every case it draws is positive and rejected, so the negative mode
    has no case to run (Hypothesis then raises ``Unsatisfiable`` after ~460 draws)."""

    def draw(*_: object) -> NoReturn:
        raise _Negatable

    explicit: dict[ParameterLocation, dict[str, Any] | None] = {
        location: None
        for location in (
            ParameterLocation.PATH,
            ParameterLocation.HEADER,
            ParameterLocation.COOKIE,
            ParameterLocation.QUERY,
        )
    }
    try:
        negated = _draw_negated_locations(
            cast(DrawFn, draw),
            operation,
            GenerationMode.NEGATIVE,
            explicit=explicit,
            body_is_generated=True,
        )
    except _Negatable:
        return True
    return negated is not None


def _all_checks() -> list[Any]:
    load_all_checks()
    return CHECKS.get_all()


def _headers(api: Api, operation: Any) -> dict[str, str]:
    tags = operation.definition.raw.get("tags") or []
    worker = "worker protocol" in tags and "administration" not in tags  # GET /v1/workers
    return api.worker if worker else api.admin


# The cases drawn for each operation and mode, by the first store's test: the next sends them.
_DRAWN: dict[tuple[str, GenerationMode], list[Any]] = {}


def _exercise(operation: Any, mode: GenerationMode, api: Api, checks: Any) -> None:
    """Every case drawn for ``operation`` in ``mode``, sent to ``api``'s app (not the app the
    schema was read from) and checked."""
    headers, app = _headers(api, operation), api.http.app
    drawn = _DRAWN.get((operation.label, mode))
    if drawn is not None:
        for case in drawn:
            case.call_and_validate(headers=headers, checks=checks, app=app)
        return
    drawn = _DRAWN[operation.label, mode] = []

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES_PER_MODE,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def keeps_contract(case: Any) -> None:
        drawn.append(case)
        case.call_and_validate(headers=headers, checks=checks, app=app)

    keeps_contract()


# Every operation, both modes: 26 s of CPU for both stores (40 s when each drew its own cases;
# SQLite, the first one run, draws them), past the default 120 s of wall under the suite's load.
@pytest.mark.timeout(300)
def test_every_operation_keeps_the_contract(api: Api) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", api.http.app, config=CONFIG)
    checks = _all_checks()
    failures: list[str] = []
    for result in schema.get_all_operations():
        if isinstance(result, Err):
            raise result.err()
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            if mode == GenerationMode.NEGATIVE and not _negatable(operation):
                continue  # no input of this operation can break its schema
            try:
                _exercise(operation, mode, api, checks)
            except Unsatisfiable:
                continue  # none of the drawn inputs broke its schema (negative mode)
            except (Exception, BaseExceptionGroup) as error:  # one report for all operations
                failures.append(f"{operation.label} [{mode.value}]: {error}")
    assert not failures, "\n\n".join(failures)
