"""A progress bar for an artifact upload: bytes sent, of all, and how fast — drawn only on a
terminal and only for a file big enough to take a moment, so piped output stays clean."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TransferSpeedColumn,
)

from herder.cli.common import out
from herder.client import UploadProgress

SHOWN_FROM_BYTES = 1024 * 1024  # smaller uploads end before a bar would be seen


@contextmanager
def upload_progress(path: Path) -> Iterator[UploadProgress | None]:
    """The callback to give ``upload_artifact``: it moves a transient bar, or it is None."""
    size = path.stat().st_size
    if not out.is_terminal or size < SHOWN_FROM_BYTES:
        yield None
        return
    with Progress(
        TextColumn("uploading {task.description}", markup=False), BarColumn(), DownloadColumn(),
        TransferSpeedColumn(), console=out, transient=True,
    ) as progress:  # fmt: skip
        task = progress.add_task(path.name, total=size)

        def advance(sent: int, total: int) -> None:
            progress.update(task, completed=sent, total=total)

        yield advance
