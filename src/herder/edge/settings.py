"""The edge's settings, from flags and ``HERDER_DIRECTORY_URL`` / ``HERDER_EDGE_*``."""

from __future__ import annotations

import os
from dataclasses import dataclass

DEFAULT_EDGE_PORT = 8088
CACHE_SECONDS = 5.0  # a tenant's home is trusted this long after it was read
UNKNOWN_CACHE_SECONDS = 1.0  # a tenant the directory lacks is answered 404 this long
TIMEOUT_SECONDS = 60.0  # a cell's answer waited for (and each pause in it)
CONNECT_SECONDS = 2.0  # a cell that takes longer to accept a connection is down
PROBE_SECONDS = 1.0  # a cell's /readyz answer, for `herder cell list`
SCRAPED_CELLS_SECONDS = 10.0  # each cell's health and tenants, shown by /metrics this long
# a moving tenant frozen, its export waits this long: a cell's API processes admit a key
# from their recent-keys cache for 5 s (store/access.py), and a write so admitted must have
# reached the store before the export reads it


@dataclass(frozen=True)
class EdgeSettings:
    directory_url: str
    host: str = "127.0.0.1"
    port: int = DEFAULT_EDGE_PORT
    default_cell_url: str | None = None  # registered as the default cell on a first start
    default_cell: str = "default"
    default_region: str = "default"
    cache_seconds: float = CACHE_SECONDS
    unknown_cache_seconds: float = UNKNOWN_CACHE_SECONDS
    timeout_seconds: float = TIMEOUT_SECONDS
    connect_seconds: float = CONNECT_SECONDS

    @classmethod
    def from_environment(
        cls,
        *,
        directory_url: str | None,
        host: str,
        port: int,
        default_cell_url: str | None,
        default_cell: str,
        default_region: str,
    ) -> EdgeSettings:
        """The flags given, the directory from ``HERDER_DIRECTORY_URL`` when not, and the
        cache's and cells' times from ``HERDER_EDGE_CACHE_SECONDS`` and
        ``HERDER_EDGE_TIMEOUT_SECONDS``."""
        return cls(
            directory_url=directory_url or os.environ.get("HERDER_DIRECTORY_URL", ""),
            host=host,
            port=port,
            default_cell_url=default_cell_url,
            default_cell=default_cell,
            default_region=default_region,
            cache_seconds=float(os.environ.get("HERDER_EDGE_CACHE_SECONDS", CACHE_SECONDS)),
            timeout_seconds=float(os.environ.get("HERDER_EDGE_TIMEOUT_SECONDS", TIMEOUT_SECONDS)),
        )
