"""The training loop of docs/checkpoints.md, run as the docs show it: stopped by SIGTERM it
saves the step it reached, and its next attempt goes on from there to the end."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

DOCS = Path(__file__).parents[2] / "docs" / "checkpoints.md"


def example_script() -> str:
    (script,) = re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.DOTALL)
    return str(script)


def test_the_documented_training_loop_saves_at_sigterm_and_resumes_from_its_step(
    tmp_path: Path,
) -> None:
    script = tmp_path / "train.py"
    script.write_text(example_script())
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    request = tmp_path / "workspace" / ".herder-checkpoint-request"
    request.parent.mkdir()
    environment = {
        "PATH": "/usr/bin:/bin",
        "HERDER_CHECKPOINT_DIR": str(checkpoint),
        "HERDER_CHECKPOINT_REQUEST": str(request),
        "STEPS": "400",
        "STEP_SECONDS": "0.002",
    }

    def attempt(number: int) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, str(script)],
            env={**environment, "HERDER_ATTEMPT": str(number)},
            stdout=subprocess.PIPE,
            text=True,
        )

    first = attempt(1)
    deadline = time.monotonic() + 30
    while not request.exists():  # it saved step 100 and asked for an upload
        assert first.poll() is None, "it ended before it asked for a save"
        assert time.monotonic() < deadline, "no save asked for in 30 s"
        time.sleep(0.01)
    first.send_signal(signal.SIGTERM)
    printed, _ = first.communicate(timeout=30)
    stopped_at = json.loads((checkpoint / "state.json").read_text())["step"]
    assert first.returncode == 143
    assert printed.splitlines() == ["attempt 1 from step 0", f"stopped at step {stopped_at}"]
    assert 100 <= stopped_at < 400

    second = attempt(2)
    printed, _ = second.communicate(timeout=60)
    assert second.returncode == 0
    assert printed.splitlines() == [f"attempt 2 from step {stopped_at}", "done"]
    assert json.loads((checkpoint / "state.json").read_text())["step"] == 400
    assert not (checkpoint / "state.partial").exists()
