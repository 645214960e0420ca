"""The API keeps the contract its OpenAPI document states: schemathesis, every check
(``--checks all``), positive and negative examples for every operation, as an admin (and
as a worker for the worker protocol), on both stores; no server error, no undocumented
status, content type, header or body.

One test per store walks every operation (a fresh PostgreSQL database per operation would
cost more than the examples); a failure lists every operation that failed.

Whether an operation has any input that breaks its schema depends on the OpenAPI document
alone (generation is derandomized): Hypothesis rejects about 460 drawn cases before it says
there is none, half a second per operation, so the second store does not search again for
an operation whose unchanged definition the first store found had none.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import CHECKS, load_all_checks
from schemathesis.core.result import Err

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


NOTHING_TO_NEGATE: set[str] = set()  # operations' definitions with no input to break


def _definition(operation: Any) -> str:
    return json.dumps([operation.label, operation.definition.raw], sort_keys=True, default=str)


def _all_checks() -> list[Any]:
    load_all_checks()
    return CHECKS.get_all()


def _headers(api: Api, operation: Any) -> dict[str, str]:
    tags = operation.definition.raw.get("tags") or []
    worker = "worker protocol" in tags and "administration" not in tags  # GET /v1/workers
    return api.worker if worker else api.admin


def _exercise(operation: Any, mode: GenerationMode, headers: dict[str, str], checks: Any) -> None:
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
        case.call_and_validate(headers=headers, checks=checks)

    keeps_contract()


# Every operation, both modes: 65-70 s alone on a quiet 2-core box (SQLite, the first one run,
# builds schemathesis's strategies), past the default 120 s under the full suite's load.
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
            if mode == GenerationMode.NEGATIVE and _definition(operation) in NOTHING_TO_NEGATE:
                continue
            try:
                _exercise(operation, mode, _headers(api, operation), checks)
            except Unsatisfiable:
                NOTHING_TO_NEGATE.add(_definition(operation))
                continue  # no input of this operation can break its schema (negative mode)
            except (Exception, BaseExceptionGroup) as error:  # one report for all operations
                failures.append(f"{operation.label} [{mode.value}]: {error}")
    assert not failures, "\n\n".join(failures)
