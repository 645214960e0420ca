"""``herder autoscaler``: keep a pool's fleet at the count the server asks for, through the
operator's scale command (docs/autoscaling.md)."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Annotated

import typer

from herder.cli.common import LOG_FORMAT, app, client
from herder.client import ClientError


@app.command()
def autoscaler(
    pool: Annotated[str, typer.Option(help="the pool (name or id); it has an autoscaling policy")],
    scale_command: Annotated[
        str,
        typer.Option(
            help="run with the decision as JSON on stdin and HERDER_POOL, "
            "HERDER_DESIRED_WORKERS, HERDER_REMOVABLE_WORKERS: start workers up to the count, "
            "stop only the removable ones"
        ),
    ],
    interval: Annotated[float, typer.Option(min=0.5, help="seconds between looks")] = 5.0,
) -> None:
    """Run the autoscaler of one pool until stopped (Ctrl-C or SIGTERM), as a system admin's
    key (HERDER_URL, HERDER_API_KEY)."""
    from herder.autoscaler import Autoscaler

    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT.format(role="autoscaler"))
    logging.getLogger("httpx").setLevel(logging.WARNING)
    log = logging.getLogger("herder.autoscaler")
    running = Autoscaler(client(), pool, scale_command)
    stopped = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopped.set())
    while not stopped.is_set():
        try:
            running.step()
        except ClientError as error:  # the server restarting, or the pool changed: say so
            log.warning("pool %s: %s", pool, error)
        stopped.wait(interval)
