"""Wake-ups of workers' claims and streams: a notice for a worker wakes its waiter; when the
store's listener says it listens (again), notices may have gone unheard meanwhile, so every
waiter wakes and looks for what to stop too."""

from __future__ import annotations

import asyncio

from herder.api.wakeups import Wakeups
from herder.store.database import LISTENING
from herder.store.notifications import ASSIGNED, WORKER_CHANNEL

LONG = 60.0  # longer than any test waits: only a wake-up ends these waits


def test_a_notice_for_a_worker_wakes_its_waiter_only() -> None:
    async def main() -> None:
        wakeups = Wakeups()
        wakeups.bind(asyncio.get_running_loop())
        waiting = {
            worker: asyncio.create_task(
                wakeups.wait(worker, wakeups.generation(worker), LONG, fallback=LONG)
            )
            for worker in ("wrk_a", "wrk_b")
        }
        await asyncio.sleep(0)
        wakeups.on_notice(WORKER_CHANNEL, f"{ASSIGNED}:wrk_a")
        async with asyncio.timeout(5):
            await waiting["wrk_a"]
        assert not waiting["wrk_b"].done()
        waiting["wrk_b"].cancel()

    asyncio.run(main())


def test_the_listener_listening_again_wakes_every_waiter_with_news() -> None:
    async def main() -> None:
        wakeups = Wakeups()
        wakeups.bind(asyncio.get_running_loop())
        waiting = [
            asyncio.create_task(
                wakeups.wait(worker, wakeups.generation(worker), LONG, fallback=LONG)
            )
            for worker in ("wrk_a", "wrk_b")
        ]
        await asyncio.sleep(0)
        wakeups.on_notice(LISTENING, "")
        async with asyncio.timeout(5):
            await asyncio.gather(*waiting)
        assert wakeups.take_news("wrk_a")
        assert wakeups.take_news("wrk_b")

    asyncio.run(main())
