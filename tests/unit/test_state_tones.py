"""Every state of every kind has a tone, a name has one tone whichever kind it is of, and each
tone has its colour in the dashboard's stylesheet and in the CLI: a state added without them
fails here."""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest

from herder.cli.dag import STATE_ORDER
from herder.cli.tones import TONE_STYLES, state_style
from herder.domain.alerts.rules import DeliveryState, IncidentState
from herder.domain.backfills import BackfillState
from herder.domain.models import WorkerState
from herder.domain.state_tones import (
    ATTEMPT_TONES,
    BACKFILL_TONES,
    DELIVERY_TONES,
    INCIDENT_TONES,
    RUN_STATES_WORST_FIRST,
    RUN_TONES,
    TONE_OF_NAME,
    TONES_BY_KIND,
    WORKER_TONES,
    WORKFLOW_RUN_TONES,
    Tone,
    tone_of,
)
from herder.domain.states import FAILED_RUN_STATES, AttemptState, RunState
from herder.domain.workflows.progress import WorkflowRunState

ROOT = Path(__file__).resolve().parents[2]
STYLESHEET = (files("herder.api.dashboard") / "static" / "style.css").read_text()
# Where the dashboard colours a state: a badge, a task's box in the graph, a timeline span.
# The workflow graph colours each task state on its own (api/dashboard/state_colours.py).
RULES = (r"\.state\.tone-{tone} \{{ background: var\(--\w+\); \}}",
         r"\.chart\.timeline \.span\.tone-{tone} \{{ fill: var\(--\w+\); \}}")  # fmt: skip


KINDS: dict[str, tuple[Mapping[Any, Tone], type[StrEnum]]] = {
    "run": (RUN_TONES, RunState),
    "attempt": (ATTEMPT_TONES, AttemptState),
    "workflow_run": (WORKFLOW_RUN_TONES, WorkflowRunState),
    "backfill": (BACKFILL_TONES, BackfillState),
    "worker": (WORKER_TONES, WorkerState),
    "incident": (INCIDENT_TONES, IncidentState),
    "delivery": (DELIVERY_TONES, DeliveryState),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_state_of_each_kind_has_a_tone(kind: str) -> None:
    table, states = KINDS[kind]
    assert set(table) == set(states)
    assert TONES_BY_KIND[kind] == {str(state): tone for state, tone in table.items()}


def test_every_kind_is_sent_to_the_dashboard() -> None:
    assert set(TONES_BY_KIND) == set(KINDS)


def test_a_name_has_one_tone_whichever_kind_it_is_of() -> None:
    for kind, table in TONES_BY_KIND.items():
        for name, tone in table.items():
            assert TONE_OF_NAME[name] is tone, f"{kind} {name}"


def test_a_name_no_kind_has_reads_neutral() -> None:
    assert tone_of("suspended-someday") is Tone.NEUTRAL
    assert tone_of("dead") is Tone.BAD


def test_the_run_states_worst_first_name_each_state_once() -> None:
    assert sorted(RUN_STATES_WORST_FIRST) == sorted(RunState)
    assert RUN_STATES_WORST_FIRST[0] is RunState.FAILED
    assert RUN_STATES_WORST_FIRST[-1] is RunState.SUCCEEDED


@pytest.mark.parametrize("tone", list(Tone))
def test_the_stylesheet_colours_each_tone_wherever_it_shows_a_state(tone: Tone) -> None:
    for rule in RULES:
        assert re.search(rule.format(tone=tone), STYLESHEET), rule.format(tone=tone)


def test_the_stylesheet_names_no_state() -> None:
    """Colours go by tone only: a rule for one state's name would be a list kept by hand."""
    for name in TONE_OF_NAME:
        assert f"state-{name}" not in STYLESHEET


# A list of string literals in a script: ``["a", "b"]`` (a ``new Set([...])`` too).
SCRIPT_LIST = re.compile(r'\[\s*("[^"\n]*"(?:\s*,\s*"[^"\n]*")+)\s*,?\s*\]')
# Two or more comparisons of one value with strings: ``s === "a" || s === "b"``.
SCRIPT_COMPARISONS = re.compile(r'(?:===\s*"[^"\n]*"[^;\n]*?(?:\|\||&&)[^;\n]*?)+===\s*"[^"\n]*"')
SCRIPTS = files("herder.api.dashboard") / "static"


def script_texts() -> dict[str, str]:
    found = {}
    folders = [SCRIPTS]
    while folders:
        for entry in folders.pop().iterdir():
            if entry.is_dir():
                folders.append(entry)
            elif entry.name.endswith(".js"):
                found[entry.name] = entry.read_text()
    return found


def test_the_dashboard_scripts_keep_no_list_of_states() -> None:
    """Their state sets come from ``/ui/states.js``, written from the domain: a list of state
    names typed into a script would not follow the domain when a set changes."""
    texts = script_texts()
    assert {"overview.js", "repair.js"} <= set(texts)
    for name, text in texts.items():
        for literal in SCRIPT_LIST.findall(text):
            strings = re.findall(r'"([^"]*)"', literal)
            states = [one for one in strings if one in TONE_OF_NAME]
            assert len(states) < 2, f"{name} lists states by hand: [{literal}]"
        for chain in SCRIPT_COMPARISONS.findall(text):
            strings = re.findall(r'"([^"]*)"', chain)
            states = [one for one in strings if one in TONE_OF_NAME]
            assert len(states) < 2, f"{name} compares with states by hand: {chain}"


def test_the_cli_styles_each_tone() -> None:
    assert set(TONE_STYLES) == set(Tone)
    assert state_style("succeeded") == "green"
    assert state_style("upstream_failed") == state_style("lost") == "bold red"


def test_the_cli_lists_a_mapped_tasks_counts_by_each_run_state() -> None:
    assert sorted(STATE_ORDER) == sorted(RunState)
    assert STATE_ORDER[0] == RunState.SUCCEEDED


def documented_run_states() -> dict[str, list[str]]:
    """docs/api.md's table of run states: each state's cells after its name."""
    text = (ROOT / "docs/api.md").read_text()
    section = text[text.index("## Run states") :]
    rows = re.findall(r"^\| `(\w+)` \| (.*) \|$", section, re.MULTILINE)
    return {name: [cell.strip() for cell in cells.split(" | ")] for name, cells in rows}


def test_the_docs_describe_each_run_state_as_the_domain_does() -> None:
    documented = documented_run_states()
    assert list(documented) == list(RunState)
    for state in RunState:
        ended, failed, tone, metric, meaning = documented[state]
        yes_no = {True: "yes", False: "no"}
        assert ended == yes_no[state.is_terminal], state
        assert failed == yes_no[state in FAILED_RUN_STATES], state
        assert tone == RUN_TONES[state], state
        assert metric == ("`herder_runs_ended_total`" if state.is_terminal else "`herder_runs`")
        assert meaning, state


def test_the_metrics_docs_name_each_run_state_where_it_is_counted() -> None:
    rows = {
        row.split(" | ")[0].strip("| `"): row
        for row in (ROOT / "docs/metrics.md").read_text().splitlines()
        if row.startswith("| `herder_runs")
    }
    for state in RunState:
        row = rows["herder_runs_ended_total" if state.is_terminal else "herder_runs"]
        assert f"`{state}`" in row, state


@pytest.mark.parametrize("path", ["deploy/prometheus/alerts.yml", "docs/metrics.md"])
def test_the_failure_rate_queries_count_the_failed_states(path: str) -> None:
    """PromQL cannot import the domain: its one list of failed outcomes is held to it here."""
    matched = re.findall(r'outcome=~"([^"]+)"', (ROOT / path).read_text())
    assert matched
    for alternatives in matched:
        assert set(alternatives.replace("\\|", "|").split("|")) == FAILED_RUN_STATES
