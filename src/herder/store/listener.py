"""PostgreSQL's ``Listener``: a thread that hears the notices other processes commit
(``notifications`` names the channels and makes one). A module apart, so that psycopg loads
only where one runs: a process on SQLite (``herder up``, most tests) never starts one."""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Sequence

import psycopg

from herder.store.database import LISTENING, Database

RECONNECT_SECONDS = 1.0

log = logging.getLogger("herder.store")


class Listener:
    """A thread that LISTENs on the channels and hands what it hears to the subscribers. It
    also listens on a channel of its own, on which ``stop`` wakes it at once."""

    def __init__(self, database: Database, channels: Sequence[str]) -> None:
        self._conninfo = psycopg.conninfo.make_conninfo(**database.driver_options())
        self._database = database
        self._channels = channels
        self._stopping = threading.Event()
        self._own_channel = f"herder_listener_{secrets.token_hex(6)}"
        self._thread = threading.Thread(target=self._run, name="pg-listener", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        try:  # rather than wait out the listener's poll
            with psycopg.connect(self._conninfo, autocommit=True, connect_timeout=2) as wake:
                wake.execute(f"NOTIFY {self._own_channel}")
        except psycopg.Error as error:
            log.info("could not wake the notification listener (it stops within 0.5 s): %s", error)
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._listen()
            except psycopg.Error as error:
                log.warning("notification listener lost its connection: %s", error)
                self._stopping.wait(RECONNECT_SECONDS)

    def _listen(self) -> None:
        with psycopg.connect(self._conninfo, autocommit=True) as connection:
            for channel in (*self._channels, self._own_channel):
                connection.execute(f"LISTEN {channel}")
            self._database.deliver(LISTENING, "")  # what came before this went unheard
            while not self._stopping.is_set():
                for notification in connection.notifies(timeout=0.5):
                    if self._stopping.is_set():
                        return
                    if notification.channel == self._own_channel:
                        continue
                    if not self._database.is_own_backend(notification.pid):
                        self._database.deliver(notification.channel, notification.payload)
