"""The Celery peer's app: Redis as broker and result backend, two tasks.

Celery's defaults otherwise, on purpose (the peer as people deploy it): prefetch multiplier 4
(each of the 2 pool processes reserves up to 4 messages), early acknowledgement, JSON.
"""

from __future__ import annotations

import os
import subprocess

from celery import Celery

REDIS_URL = os.environ.get("BENCH_CELERY_REDIS_URL", "redis://127.0.0.1:6379/15")

app = Celery("bench", broker=REDIS_URL, backend=REDIS_URL)
app.conf.broker_connection_retry_on_startup = True  # silences a Celery 5 deprecation warning


@app.task
def run_true() -> None:
    """What a Herder run of ``true`` does: start the program and wait for it."""
    subprocess.run(["/bin/true"], check=True)


@app.task
def no_op() -> None:
    """The broker and worker round trip alone."""
