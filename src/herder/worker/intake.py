"""How a registered worker takes its work: on its stream, where the server pushes what it
places here (``stream.py``), or by long-polling claims where it cannot (the server has no
stream, a proxy refuses the WebSocket, ``--no-stream``). Either way each answer goes to the
agent's ``take``; the loop returns only when the registration is over."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from herder.protocol import ClaimReply, HeldAttempt, StreamWant
from herder.worker.connection import RegistrationOver, ServerConnection, described
from herder.worker.reporter import backoff
from herder.worker.stream import CONNECTION_TROUBLE, StreamOver, StreamRefused

log = logging.getLogger("herder.worker")


@dataclass(frozen=True)
class Intake:
    connection: ServerConnection
    max_runs: int
    take: Callable[[ClaimReply], None]  # stop what an answer says, start what it gives
    holding: Callable[[], list[HeldAttempt]]  # the attempts the worker runs now
    leaving: Callable[[], bool]  # stopping: the server is told to place nothing more here

    async def run(self, streams: bool) -> None:
        """Until the registration is over (``RegistrationOver``): on the stream when
        ``streams``, else, or once no stream can be opened, by long-polls."""
        if streams:
            await self._on_the_stream()
        await self._by_long_polls()

    async def _on_the_stream(self) -> None:
        """Keep the stream open, opening it again when it closes; return when no stream can
        be opened here."""
        failures = 0
        while True:
            want = StreamWant(
                type="want",
                max_runs=self.max_runs,
                running=self.holding(),
                leaving=self.leaving() or None,
            )
            try:
                await self.connection.stream(want, self.take)
                failures = 0  # closed by the server (it stops): open it again, at once
            except StreamOver as error:
                log.info("the server ended this registration's stream: %s", error)
                raise RegistrationOver(str(error)) from error
            except StreamRefused as error:
                log.warning("the server opens no stream here (%s): claiming with long-polls",
                            error)  # fmt: skip
                return
            except CONNECTION_TROUBLE as error:
                failures += 1
                log.warning("the stream broke: %s", str(error) or type(error).__name__)
            await asyncio.sleep(backoff(failures))

    async def _by_long_polls(self) -> None:
        failures = 0
        while True:
            try:
                reply = await self.connection.claim(
                    self.max_runs, self.holding(), leaving=self.leaving()
                )
                failures = 0
            except httpx.HTTPError as error:
                failures += 1
                log.warning("claim failed: %s", described(error))
                await asyncio.sleep(backoff(failures))
                continue
            self.take(reply)
