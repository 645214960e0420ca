"""The console's job form (``views/job_form.js``) keeps small copies of the server's rules
as JSON literals: the runtime a file's name suggests (the CLI's guess), the runtimes, the
upload limit and the parameter types. Each is read from the script and held to the Python
it copies, so a change to one fails here until the other follows; and the guess itself is
run on the same names in Node and in Python."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from herder.cli.jobs import _RUNTIME_BY_SUFFIX, _file_runtime
from herder.domain.jobs import MAX_ARTIFACT_BYTES, Runtime
from herder.domain.parameters import ParameterType

SCRIPT = Path(__file__).resolve().parents[2] / "src/herder/api/dashboard/static/views/job_form.js"
NAMES = [
    "job.py", "job.PY", "bundle.zip", "site.tar", "site.tar.gz", "site.tgz", "run",
    "run.sh", ".py", "archive.", "a.b.py", "<img src=x>.py", "tool.exe",
]  # fmt: skip


def literal(name: str) -> object:
    found = re.search(rf"^export const {name} = (.+);$", SCRIPT.read_text(), re.MULTILINE)
    assert found, f"{SCRIPT.name} has no one-line `export const {name} = …;`"
    return json.loads(found.group(1))


def test_the_forms_tables_are_the_servers() -> None:
    assert literal("RUNTIME_BY_SUFFIX") == _RUNTIME_BY_SUFFIX
    assert literal("RUNTIMES") == [runtime.value for runtime in Runtime]
    assert literal("MAX_ARTIFACT_BYTES") == MAX_ARTIFACT_BYTES
    assert literal("PARAMETER_TYPES") == [kind.value for kind in ParameterType]


def test_the_form_guesses_a_runtime_as_the_cli_does() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is missing: the dashboard's scripts are checked with it")
    # The function alone, evaluated with its table: the module imports the browser's others.
    source = SCRIPT.read_text()
    table = re.search(r"^export const RUNTIME_BY_SUFFIX = .+;$", source, re.MULTILINE)
    function = re.search(r"^export function runtimeOf\(.*?^}$", source, re.MULTILINE | re.DOTALL)
    assert table
    assert function
    program = "\n".join([
        table.group(0).removeprefix("export "),
        function.group(0).removeprefix("export "),
        f"console.log(JSON.stringify({json.dumps(NAMES)}.map(runtimeOf)));",
    ])  # fmt: skip
    guessed = subprocess.run(
        [node, "--input-type=module", "-e", program],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    expected = [_file_runtime(Path(name), None, None) for name in NAMES]
    assert json.loads(guessed.stdout) == expected
