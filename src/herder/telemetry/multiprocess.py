"""Metrics of several API processes (``herder server --processes N``) added up.

prometheus-client's multiprocess mode: each process writes its metrics to files of its own
in one directory, and a scrape of any process reads them all. The directory is the parent's,
private (0700), wiped at start; the parent names it in the environment before anything
imports prometheus_client (which picks how to keep values when it is imported; the children
inherit both by ``fork``), and removes a dead child's live gauges. Without it (``herder up``,
one process) the usual registry is read.

This module imports prometheus_client only when called, so ``prepare`` can come first.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

ENVIRONMENT = "PROMETHEUS_MULTIPROC_DIR"


def prepare(directory: Path) -> None:
    """Keep this process tree's metrics in ``directory`` (emptied, 0700)."""
    if "prometheus_client" in sys.modules:
        raise RuntimeError("prometheus_client was imported before its multiprocess directory")
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(mode=0o700, parents=True)
    os.environ[ENVIRONMENT] = str(directory)


def finish(directory: Path) -> None:
    os.environ.pop(ENVIRONMENT, None)
    shutil.rmtree(directory, ignore_errors=True)


def child_ended(pid: int) -> None:
    """Forget the child's live gauges (its counters and histograms keep counting)."""
    if ENVIRONMENT in os.environ:
        from prometheus_client import multiprocess as prometheus_multiprocess

        prometheus_multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]


def registry() -> CollectorRegistry:
    """What a scrape reads: every process's metrics, or this one's."""
    from prometheus_client import REGISTRY, CollectorRegistry
    from prometheus_client import multiprocess as prometheus_multiprocess

    if ENVIRONMENT not in os.environ:
        return REGISTRY
    combined = CollectorRegistry(auto_describe=False)
    prometheus_multiprocess.MultiProcessCollector(combined)  # type: ignore[no-untyped-call]
    return combined
