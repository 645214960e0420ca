"""Every YAML example of the README and docs/ is a file ``herder apply`` takes, as a reader
copies it: applied to a fresh tenant, applied again it changes nothing, and its ``export``
applied with ``--prune`` changes nothing either. A block that is not a definitions file (a
fragment of one, another program's configuration) says so on the line before it:
``<!-- not applied: why -->``. The local files an example names are made here, as its
runtime wants them."""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from herder.store.cold.blobs import DirectoryBlobStore
from herder.store.store import Store
from tests.conftest import opened_store
from tests.images import Image, Member, image_config, layer_tar
from tests.integration.conftest import Herder
from tests.integration.test_apply import ok

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```ya?ml\n(.*?)^```", re.S | re.M)
NOT_APPLIED = "<!-- not applied:"
REGISTRY = "https://registry.internal"  # the operator's registry the docs' examples name
SECRET = "a-secret-of-the-example-0123456789"


@dataclass(frozen=True)
class Example:
    document: str
    line: int
    text: str
    applied: bool

    @property
    def label(self) -> str:
        return f"{self.document}:{self.line}"


def examples_in(name: str, text: str) -> list[Example]:
    """The YAML blocks of a document, each applied unless the line before it says not."""
    found = []
    for block in BLOCK.finditer(text):
        before = text[: block.start()].splitlines()
        applied = not (before and before[-1].startswith(NOT_APPLIED))
        found.append(Example(name, len(before) + 1, block.group(1), applied))
    return found


EXAMPLES = [
    example
    for document in DOCUMENTS
    for example in examples_in(document.name, document.read_text())
]


@pytest.fixture
def store(database_url: str, artifact_blobs: DirectoryBlobStore) -> Iterator[Store]:
    """The server as the docs' operator sets it up: ``registry.internal`` allowed."""
    yield from opened_store(database_url, artifact_blobs, REGISTRY)


def make_local_files(directory: Path, document: dict[str, Any]) -> None:
    """Each local artifact a job names, as its runtime takes it."""
    for job in document.get("jobs") or []:
        artifact = job.get("artifact")
        if not isinstance(artifact, str) or re.fullmatch(r"[0-9a-f]{64}", artifact):
            continue
        path = directory / artifact
        path.parent.mkdir(parents=True, exist_ok=True)
        if job.get("runtime") == "archive":
            with zipfile.ZipFile(path, "w") as archive:
                archive.writestr("main.py", "print('from the archive')")
        elif job.get("runtime") == "image":
            layers = [layer_tar([Member("app/main.js", b"console.log('hi')")])]
            path.write_bytes(Image(layers, image_config(layers)).oci_archive())
        else:
            path.write_text("#!/usr/bin/env python3\nprint('hi')\n")


@pytest.mark.parametrize(
    "example", [example for example in EXAMPLES if example.applied], ids=lambda e: e.label
)
def test_a_docs_example_applies_and_round_trips_through_export(
    example: Example, herder: Herder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "example"
    directory.mkdir()
    document = yaml.safe_load(example.text)
    make_local_files(directory, document)
    for hook in document.get("hooks") or []:
        if "secret_from" in hook:
            monkeypatch.setenv(hook["secret_from"], SECRET)
    path = directory / "herder.yaml"
    path.write_text(example.text)

    assert "nothing to change" not in ok(herder("apply", "-f", str(path)))
    assert "nothing to change" in ok(herder("apply", "-f", str(path), "--dry-run"))
    exported = tmp_path / "exported.yaml"
    ok(herder("export", "-o", str(exported)))
    assert "nothing to change" in ok(herder("apply", "-f", str(exported), "--prune"))


def test_the_docs_have_examples_to_apply() -> None:
    labels = {example.label.partition(":")[0] for example in EXAMPLES if example.applied}
    assert {"apply.md", "events.md", "flow-control.md"} <= labels


def test_a_block_is_applied_unless_the_line_before_it_says_not() -> None:
    text = (
        "a\n```yaml\njobs: []\n```\n"
        "<!-- not applied: a fragment -->\n```yaml\ndeadline: {}\n```\n"
        "```yml\nlimits: []\n```\n```json\n{}\n```\n"
    )
    assert examples_in("doc.md", text) == [
        Example("doc.md", 2, "jobs: []\n", applied=True),
        Example("doc.md", 6, "deadline: {}\n", applied=False),
        Example("doc.md", 9, "limits: []\n", applied=True),
    ]
