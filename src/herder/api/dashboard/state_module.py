"""``/ui/states.js``: the dashboard's states, written from the domain when first asked for.

The page's one module not in ``static/``: the run states (in order, active, failed, live,
worst first, done for a repair), the outcomes the overview charts, the ended workflow-run
states, every state's tone and each task state's colour, the
job names of the runs of tasks that run nothing (a wait, an approval), the roles (weakest
first) and the longest window the overview's stats take, so the scripts and the stylesheet
keep no list of their own. Plain constants as JSON literals: the same strict
policy applies.
"""

from __future__ import annotations

import functools
import json

from herder.api.dashboard.state_colours import TASK_STATE_COLOURS
from herder.domain.models import Role
from herder.domain.state_tones import RUN_STATES_WORST_FIRST, TONE_OF_NAME
from herder.domain.states import (
    ACTIVE_RUN_STATES,
    FAILED_RUN_STATES,
    LIVE_RUN_STATES,
    STARTS_AT_RUN_STATES,
    RunState,
)
from herder.domain.stats import MAX_MINUTES, Outcome
from herder.domain.workflows.progress import WorkflowRunState
from herder.domain.workflows.repair import DONE_RUN_STATES
from herder.domain.workflows.spec import TaskKind

PATH = "states.js"


def _in_order(states: frozenset[RunState]) -> list[RunState]:
    return [state for state in RunState if state in states]


_CONSTANTS: dict[str, object] = {
    "RUN_STATES": list(RunState),
    "ACTIVE_RUN_STATES": _in_order(ACTIVE_RUN_STATES),
    "FAILED_RUN_STATES": _in_order(FAILED_RUN_STATES),
    "LIVE_RUN_STATES": _in_order(LIVE_RUN_STATES),  # what the overview counts (``stats.runs``)
    "REPAIR_DONE_RUN_STATES": _in_order(DONE_RUN_STATES),  # not ticked for a repair
    "STARTS_AT_RUN_STATES": _in_order(STARTS_AT_RUN_STATES),  # the run page's "Starts at"
    "OUTCOMES": list(Outcome),  # how the overview charts what ended (``stats.ended``)
    "RUN_STATES_WORST_FIRST": list(RUN_STATES_WORST_FIRST),
    "ENDED_WORKFLOW_RUN_STATES": [state for state in WorkflowRunState if state.is_terminal],
    "TONE_OF_STATE": TONE_OF_NAME,
    "COLOUR_OF_TASK_STATE": TASK_STATE_COLOURS,
    "TASK_KIND_OF_JOB_NAME": {kind.job_name: kind for kind in TaskKind if kind is not TaskKind.JOB},
    "ROLES_WEAKEST_FIRST": sorted(Role, key=lambda role: sum(map(role.includes, Role))),
    "STATS_MAX_MINUTES": MAX_MINUTES,  # the longest window /v1/stats charts
}


@functools.cache
def states_module() -> bytes:
    lines = [
        "// Written by the server from herder.domain (states, state_tones): do not copy.",
        *(f"export const {name} = {json.dumps(value)};" for name, value in _CONSTANTS.items()),
    ]
    return ("\n".join(lines) + "\n").encode()
