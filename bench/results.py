"""bench/RESULTS.md: each scenario's section appended to it, newest last."""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).parent / "RESULTS.md"


def append(lines: list[str]) -> None:
    if not RESULTS.exists():
        RESULTS.write_text("# Benchmark results\n\nAppended by `make bench`; newest last.\n")
    with RESULTS.open("a") as file:
        file.write("\n".join(lines) + "\n")
    print(f"appended to {RESULTS}")
