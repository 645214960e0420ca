"""Each task state's own colour, for the dashboard's workflow graph and its legend (sent in
``/ui/states.js``). Tones (``domain.state_tones``) group states — ``failed`` and
``upstream_failed`` are both bad — but a graph must tell a task that failed from one that
never ran because of it, so every state here has a colour no other state has, dark enough
for the white text on its box (``tests/unit/test_state_colours.py``).
"""

from __future__ import annotations

from herder.domain.states import RunState

TASK_STATE_COLOURS: dict[RunState, str] = {
    RunState.SCHEDULED: "#434190",  # indigo
    RunState.PENDING: "#718096",  # grey: not decided yet
    RunState.QUEUED: "#2a4365",  # navy
    RunState.RUNNING: "#3182ce",  # blue
    RunState.RETRY_WAIT: "#b7791f",  # amber
    RunState.SUSPENDED: "#6b46c1",  # purple
    RunState.WAITING: "#2c7a7b",  # teal: a wait or an approval
    RunState.SUCCEEDED: "#2f855a",  # green (the dashboard's --ok)
    RunState.FAILED: "#c53030",  # red (the dashboard's --bad)
    RunState.TIMED_OUT: "#822727",  # maroon
    RunState.LOST: "#97266d",  # magenta
    RunState.CANCELLED: "#4a5568",  # slate
    RunState.DEAD: "#1a202c",  # near black
    RunState.EXPIRED: "#744210",  # brown
    RunState.SKIPPED: "#667a1e",  # olive
    RunState.UPSTREAM_FAILED: "#c05621",  # orange: not run, because of a failure upstream
}
