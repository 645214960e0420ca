"""A run's output, from the file its job writes to what the lifecycle keeps; and what a
workflow task's job is told."""

from __future__ import annotations

import json
import os
import random
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from herder.domain.jobs import JobSpec, Runtime
from herder.domain.lifecycle.facts import AttemptFacts, RunFacts
from herder.domain.lifecycle.settle import settle
from herder.domain.models import AssignedTask, Assignment
from herder.domain.outputs import MAX_OUTPUT_BYTES, output_problem
from herder.domain.states import AttemptState, RunState
from herder.protocol import Completion, OutputChunk, Report
from herder.worker.reporter import split
from herder.worker.sandbox import attempt_environment
from herder.worker.task_files import INPUTS, OUTPUT, OutputRefused, read_output, write_inputs

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return tmp_path


def write(workspace: Path, data: bytes) -> None:
    (workspace / OUTPUT).write_bytes(data)


def json_of_size(size: int) -> bytes:
    """A JSON string of exactly ``size`` bytes."""
    return json.dumps("x" * (size - 2)).encode()


# --- the worker's reader --------------------------------------------------------------------


def test_no_file_is_no_output(workspace: Path) -> None:
    assert read_output(workspace) is None


def test_the_json_written_is_the_output(workspace: Path) -> None:
    write(workspace, b'{"rows": 3, "names": ["a", "\xc3\xa9"]}\n')
    assert read_output(workspace) == {"rows": 3, "names": ["a", "é"]}


def test_64_kib_is_kept_and_one_byte_more_is_refused(workspace: Path) -> None:
    write(workspace, json_of_size(MAX_OUTPUT_BYTES))
    assert read_output(workspace) == "x" * (MAX_OUTPUT_BYTES - 2)
    write(workspace, json_of_size(MAX_OUTPUT_BYTES + 1))
    with pytest.raises(OutputRefused) as refused:
        read_output(workspace)
    assert str(refused.value) == (
        "the output written to $HERDER_OUTPUT is 65,537 bytes; at most 65,536 (64 KiB) are kept"
    )


def test_a_huge_file_is_refused_with_its_size(workspace: Path) -> None:
    write(workspace, b" " * 70_012)
    with pytest.raises(OutputRefused, match="is 70,012 bytes; at most 65,536"):
        read_output(workspace)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"", "is not JSON: Expecting value at line 1 column 1"),
        (b"{rows: 3}", "is not JSON: Expecting property name enclosed in double quotes"),
        (b'"\xff"', "is not UTF-8: invalid start byte"),
        (b"NaN", "is not JSON Herder can keep: NaN is not a JSON number"),
        (b"[1e999]", "contains the number inf, which JSON cannot hold"),
        (b'{"a": "\\u0000"}', "contains a NUL character"),
        (b"[" * 101 + b"]" * 101, "is nested more than 100 levels deep"),
        (b"[" * 30_000 + b"]" * 30_000, "is not JSON Herder can keep"),
    ],
)
def test_what_is_not_keepable_json_is_refused(workspace: Path, data: bytes, why: str) -> None:
    write(workspace, data)
    with pytest.raises(OutputRefused, match=r"^the output written to \$HERDER_OUTPUT ") as refused:
        read_output(workspace)
    assert why in str(refused.value)


def test_a_symbolic_link_is_never_followed(
    workspace: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    secret = tmp_path_factory.mktemp("elsewhere") / "secret.json"
    secret.write_text('{"password": "hunter2"}')
    (workspace / OUTPUT).symlink_to(secret)
    with pytest.raises(OutputRefused, match="symbolic link") as refused:
        read_output(workspace)
    assert "hunter2" not in str(refused.value)


def test_a_fifo_is_refused_without_waiting_for_a_writer(workspace: Path) -> None:
    os.mkfifo(workspace / OUTPUT)
    done: list[BaseException | None] = []

    def read() -> None:
        try:
            read_output(workspace)
        except OutputRefused as refused:
            done.append(refused)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=5)
    assert done, "the read waited for a writer"
    assert "not a regular file" in str(done[0])


def test_a_directory_is_refused(workspace: Path) -> None:
    (workspace / OUTPUT).mkdir()
    with pytest.raises(OutputRefused, match="not a regular file"):
        read_output(workspace)


def test_a_tasks_inputs_are_written_for_the_job(tmp_path: Path) -> None:
    write_inputs(tmp_path, None, {"extract": {"rows": 3}, "shards": [1, None]})
    inputs = tmp_path / INPUTS
    assert json.loads(inputs.read_text()) == {"extract": {"rows": 3}, "shards": [1, None]}
    assert inputs.stat().st_mode & 0o777 == 0o600


def test_an_archive_entry_named_like_the_inputs_is_refused(tmp_path: Path) -> None:
    (tmp_path / INPUTS).symlink_to("/etc/passwd")
    with pytest.raises(FileExistsError):
        write_inputs(tmp_path, None, {})


# --- the server's check of what a worker says -----------------------------------------------


def completion(output: object, outcome: str = "succeeded") -> Completion:
    body = {"attempt_id": "att_1", "attempt": 1, "outcome": outcome, "output": output}
    return Completion.model_validate(body)


def test_a_reported_output_is_kept_when_it_can_be() -> None:
    ending = completion({"rows": 3}).ending("wrk_1")
    assert (ending.outcome, ending.output) == (AttemptState.SUCCEEDED, {"rows": 3})


@pytest.mark.parametrize(
    ("output", "why"),
    [
        ("x" * MAX_OUTPUT_BYTES, "the output reported is 65,538 bytes; at most 65,536"),
        (float("nan"), "the output reported contains the number nan"),
        (json.loads("[" * 150 + "]" * 150), "the output reported is nested more than 100"),
    ],
)
def test_a_reported_output_that_cannot_be_kept_fails_the_attempt(output: object, why: str) -> None:
    ending = completion(output).ending("wrk_1")
    assert ending.outcome is AttemptState.FAILED
    assert ending.reason.startswith(why)
    assert ending.output is None


def test_the_output_of_an_attempt_that_failed_is_dropped() -> None:
    ending = completion({"rows": 3}, "failed").ending("wrk_1")
    assert (ending.outcome, ending.output) == (AttemptState.FAILED, None)


def test_the_size_counts_the_compact_encoding() -> None:
    assert output_problem({"k": "é" * 1000}) is None
    assert output_problem(["x" * (MAX_OUTPUT_BYTES - 4)]) is None
    assert output_problem(["x" * (MAX_OUTPUT_BYTES - 3)]) is not None


@pytest.mark.parametrize(
    ("outcome", "kept"),
    [(AttemptState.SUCCEEDED, True), (AttemptState.FAILED, False)],
)
def test_the_run_keeps_the_output_only_when_it_succeeds(outcome: AttemptState, kept: bool) -> None:
    run = RunFacts("run_1", RunState.RUNNING, attempt=1)
    attempt = AttemptFacts("att_1", "run_1", 1, "wrk_1")
    ending = completion({"rows": 3}, outcome.value).ending("wrk_1")
    changes, _ = settle(
        {"run_1": run}, {"att_1": attempt}, [ending], actor="w", now=NOW, rng=random.Random(1)
    )
    (move,) = changes.moves
    assert ("output" in move.values) is kept
    if kept:
        assert move.values["output"] == {"rows": 3}


# --- what the job is told -------------------------------------------------------------------


def assignment(task: AssignedTask | None) -> Assignment:
    return Assignment(
        attempt_id="att_1",
        attempt=1,
        run_id="run_1",
        tenant_id="ten_1",
        idempotency_key=None,
        spec=JobSpec(runtime=Runtime.SHELL, command="true"),
        task=task,
    )


def herder_env(task: AssignedTask | None) -> dict[str, str]:
    env = attempt_environment(assignment(task), Path("/workspace"), Path("/tmp"))
    mine = ("HERDER_OUTPUT", "HERDER_INPUTS", "HERDER_TASK", "HERDER_MAP", "HERDER_WORKFLOW")
    return {key: value for key, value in env.items() if key.startswith(mine)}


def test_every_job_is_told_where_to_write_its_output() -> None:
    assert herder_env(None) == {"HERDER_OUTPUT": "/workspace/.herder-output.json"}


def test_a_task_is_told_which_it_is_and_where_its_inputs_are() -> None:
    task = AssignedTask(workflow_run_id="wfr_1", task_name="load", inputs={"extract": 1})
    assert herder_env(task) == {
        "HERDER_OUTPUT": "/workspace/.herder-output.json",
        "HERDER_WORKFLOW_RUN_ID": "wfr_1",
        "HERDER_TASK": "load",
        "HERDER_INPUTS": "/workspace/.herder-inputs.json",
    }


def test_a_mapped_task_is_told_its_index_and_item() -> None:
    task = AssignedTask(
        workflow_run_id="wfr_1", task_name="shard", map_index=0, map_item={"day": "2026-01-01"}
    )
    env = herder_env(task)
    assert env["HERDER_MAP_INDEX"] == "0"
    assert json.loads(env["HERDER_MAP_ITEM"]) == {"day": "2026-01-01"}


# --- reports stay under the server's body limit ---------------------------------------------


def test_a_large_report_goes_in_parts_each_attempts_logs_before_its_completion() -> None:
    logs = [OutputChunk.of("att_1", 1, seq, "stdout", b"x" * 300_000) for seq in range(8)]
    ends = [completion("x" * 60_000).model_copy(update={"attempt_id": f"a{n}"}) for n in range(20)]
    loud = completion("x" * 60_000).model_copy(update={"attempt_id": "att_1"})
    parts = split(Report(logs=logs, completions=[*ends, loud]), budget=1024 * 1024)
    assert len(parts) > 2
    assert all(len(part.model_dump_json()) < 1024 * 1024 + 100_000 for part in parts)
    assert [chunk for part in parts for chunk in part.logs] == logs
    assert [item for part in parts for item in part.completions] == [*ends, loud]
    applied = [item for part in parts for item in (*part.logs, *part.completions)]
    assert applied.index(loud) > applied.index(logs[-1])  # an attempt's last words, then its end
    # the quiet attempts' ends go first, not behind another attempt's megabytes of output
    assert max(applied.index(end) for end in ends) < applied.index(logs[2])


def test_a_small_report_goes_whole() -> None:
    report = Report(completions=[completion(None)])
    assert split(report) == [report]
