"""What a ``network: true`` attempt's network costs the worker: open and close, wall time
and CPU (the process's, so the kernel's work for it is counted). Root only:
``sudo .venv/bin/python -m bench.attempt_network``."""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from herder.worker.host import UID_LOCKS
from herder.worker.network import OutboundNetworks
from herder.worker.statedir import secure_directory
from herder.worker.uids import reserve_uid_pool

BENCH_NUMBER = 3_100_000_000  # the bench's worker number, far above workers' uid ranges


def measure(count: int) -> dict[str, float]:
    """Median milliseconds of ``count`` attempts opened and closed one after another."""
    samples: dict[str, list[float]] = {"open": [], "open cpu": [], "close": [], "close cpu": []}
    pool, held = reserve_uid_pool(BENCH_NUMBER, 1, secure_directory(UID_LOCKS))  # as a worker does
    with tempfile.TemporaryDirectory() as state:
        networks = OutboundNetworks(Path(state), pool.base, [])
        try:
            for number in range(count):
                wall, cpu = time.perf_counter(), time.process_time()
                network = networks.open(f"bench-{number}")
                samples["open"].append(time.perf_counter() - wall)
                samples["open cpu"].append(time.process_time() - cpu)
                wall, cpu = time.perf_counter(), time.process_time()
                networks.close(network)
                samples["close"].append(time.perf_counter() - wall)
                samples["close cpu"].append(time.process_time() - cpu)
        finally:
            networks.close_all()
            held.release()
    return {name: statistics.median(values) * 1000 for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=100)
    medians = measure(parser.parse_args().count)
    print(", ".join(f"{name} {value:.2f} ms" for name, value in medians.items()))


if __name__ == "__main__":
    main()
