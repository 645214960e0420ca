"""On PostgreSQL every API replica hears submits and cancels made through the others."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy.engine import make_url

from herder.app.claims import claim
from herder.app.runs import cancel_run
from herder.app.submit import submit
from herder.domain.jobs import JobSpec, Resources
from herder.domain.overrides import RunOverrides
from herder.store.database import LISTENING, Database
from herder.store.listener import Listener
from herder.store.notifications import CHANNELS, WORK_CHANNEL
from herder.store.store import Store
from tests.conftest import fresh_postgres_url
from tests.integration.dispatching import dispatch


@pytest.fixture
def postgres_store(postgres_template: str) -> Iterator[Store]:
    urls = fresh_postgres_url(postgres_template)
    store = Store(next(urls))
    yield store
    store.close()
    next(urls, None)  # drops the database


PROBE = "probe"  # a payload no notice of the store sends


def until_listening(database: Database, listening: threading.Event) -> None:
    """Send probes until the listener hears one: then it LISTENs."""
    deadline = time.monotonic() + 5
    while not listening.is_set():
        assert time.monotonic() < deadline, "the listener never started listening"
        with database.write() as connection:
            database.notify(connection, WORK_CHANNEL, PROBE)
        listening.wait(0.05)


@pytest.mark.postgres
def test_a_listener_hears_new_work_and_news_for_a_worker(postgres_store: Store) -> None:
    store = postgres_store
    work, news, listening = threading.Event(), [], threading.Event()

    def hear(channel: str, payload: str) -> None:
        if payload == PROBE:
            listening.set()
        elif channel == WORK_CHANNEL:
            work.set()
        else:
            news.append(payload)

    other_process = Database(store.database.url)  # stands for another API replica
    other_process.subscribe(hear)
    listener = Listener(other_process, CHANNELS)
    listener.start()
    try:
        until_listening(store.database, listening)  # before anything is sent
        tenant = store.access.create_tenant("t")
        job = store.jobs.create(tenant.id, "j", JobSpec(runtime="shell", command="sleep 9"))
        run, _ = submit(store, tenant.id, job.id, RunOverrides())
        assert work.wait(5), "no notification of new work"
        token_id = store.access.authenticate_worker_token(store.access.create_worker_token("w"))
        worker, _secret = store.workers.register(
            token_id, name="w", capacity=Resources(), max_slots=1, labels={}, version="t"
        )
        dispatch(store)
        claim(store, worker.id, 1)
        cancel_run(store, tenant.id, run.id)
        deadline = time.monotonic() + 5
        while f"cancel:{worker.id}" not in news and time.monotonic() < deadline:
            time.sleep(0.05)
        assert f"cancel:{worker.id}" in news
    finally:
        listener.stop()
        other_process.dispose()


@pytest.mark.postgres
def test_a_process_hears_its_own_notices_once_at_commit_and_others_through_the_listener(
    postgres_store: Store,
) -> None:
    database = postgres_store.database
    heard: list[str] = []
    listening = threading.Event()

    def hear(channel: str, payload: str) -> None:
        if payload == PROBE:
            listening.set()
        elif channel != LISTENING:  # the listener saying it listens: no notice of ours
            heard.append(payload)

    database.subscribe(hear)
    other_process = Database(database.url)
    listener = Listener(database, CHANNELS)
    listener.start()
    try:
        until_listening(other_process, listening)
        with database.write() as connection:
            database.notify(connection, WORK_CHANNEL, "mine")
            database.notify(connection, WORK_CHANNEL, "mine")  # the same notice: sent once
            assert heard == []  # nothing before the commit
        assert heard == ["mine"]  # at once, without a round trip through the listener
        with other_process.write() as connection:
            other_process.notify(connection, WORK_CHANNEL, "theirs")
        deadline = time.monotonic() + 5
        while "theirs" not in heard and time.monotonic() < deadline:
            time.sleep(0.01)
        # NOTIFYs arrive in commit order: the listener skipped this process's own.
        assert heard == ["mine", "theirs"]
    finally:
        listener.stop()
        other_process.dispose()


def listed_first_behind_a_closed_port(url: str) -> str:
    """``url`` in libpq's multi-host form, behind a host where nothing listens: as a URL of
    a formation reads while its first node is down."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]  # nothing listens there once the probe is closed
    parsed = make_url(url)
    credentials = f"{parsed.username}@" if parsed.username else ""
    return (
        f"postgresql://{credentials}127.0.0.1:{closed},{parsed.host}:{parsed.port}"
        f"/{parsed.database}?target_session_attrs=read-write"
    )


@pytest.mark.postgres
def test_a_url_listing_several_hosts_reaches_the_one_that_answers_listener_too(
    postgres_store: Store,
) -> None:
    """The URL pg_auto_failover and Patroni print; the listener used to read only the first
    host of a URL (and none of its parameters)."""
    database = Database(listed_first_behind_a_closed_port(postgres_store.database.url))
    heard, listening = threading.Event(), threading.Event()

    def hear(_channel: str, payload: str) -> None:
        (listening if payload == PROBE else heard).set()

    database.subscribe(hear)
    listener = Listener(database, CHANNELS)
    listener.start()
    try:
        database.ping()
        until_listening(postgres_store.database, listening)
        with postgres_store.database.write() as connection:
            postgres_store.database.notify(connection, WORK_CHANNEL, "through the second host")
        assert heard.wait(5)
    finally:
        listener.stop()
        database.dispose()


@pytest.mark.postgres
def test_a_listener_says_when_it_listens_so_waiters_look_for_what_went_unheard(
    postgres_store: Store,
) -> None:
    heard = threading.Event()

    def hear(channel: str, _payload: str) -> None:
        if channel == LISTENING:
            heard.set()

    other_process = Database(postgres_store.database.url)
    other_process.subscribe(hear)
    listener = Listener(other_process, CHANNELS)
    listener.start()
    try:
        assert heard.wait(10), "the listener never said it listens"
    finally:
        listener.stop()
        other_process.dispose()
