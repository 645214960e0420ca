"""What ``job create`` tells of an image archive and of an image job's command: the layout
an archive's member names show, and the warning for a command its entrypoint would not run
as meant (``domain/images.command_warning``)."""

from __future__ import annotations

import pytest

from herder.cli.image_files import DOCKER_SAVE, OCI_LAYOUT, image_layout
from herder.domain.images import command_warning

SH_C = ("/bin/sh", "-c")


@pytest.mark.parametrize(
    ("names", "layout"),
    [
        ({"oci-layout", "index.json", "blobs/sha256/ab"}, OCI_LAYOUT),
        ({"manifest.json", "repositories", "0a1b/layer.tar", "0a1b.json"}, DOCKER_SAVE),
        ({"manifest.json", "1/layer.tar"}, DOCKER_SAVE),
        ({"manifest.json", "index.json", "oci-layout", "blobs/sha256/ab"}, OCI_LAYOUT),
        ({"manifest.json", "blobs/sha256/ab"}, DOCKER_SAVE),
        ({"manifest.json", "popup.html", "icons/16.png"}, None),  # a browser extension
        ({"index.json", "blobs/sha256/ab"}, None),
        ({"app/main.py"}, None),
        (set(), None),
    ],
)
def test_an_archive_is_an_image_by_its_member_names(names: set[str], layout: str | None) -> None:
    assert image_layout(names) == layout


@pytest.mark.parametrize(
    ("entrypoint", "command", "words"),
    [
        (SH_C, "echo hello world", "runs only the command's first word ('echo')"),
        (("bash", "-ec"), "set -x; run", "entrypoint bash -ec runs only"),
        (SH_C, "'echo hello world'", None),
        (SH_C, "true", None),
        ((), "a && b", "so '&&' reaches the program as a word: make it sh -c 'a && b'"),
        (("/app/server",), "--port 80", None),
        (("/app/server",), "--port 80 > log", "reaches the image's entrypoint /app/server"),
        (None, "python train.py --epochs 3", None),
        (None, "a | b", "if the image's entrypoint is sh -c"),
        (None, "echo $HOME", "so '$HOME' reaches"),
        (None, 'echo "$HOME"', "so '$HOME' reaches"),
        (None, "echo '$HOME'", None),
        (None, "echo 'a | b'", None),
        (None, 'echo "unclosed', None),  # refused when saved, saying why
    ],
)
def test_a_command_the_entrypoint_would_not_run_as_meant_is_told(
    entrypoint: tuple[str, ...] | None, command: str, words: str | None
) -> None:
    warning = command_warning(entrypoint, command)
    if words is None:
        assert warning is None
    else:
        assert warning is not None
        assert words in warning
