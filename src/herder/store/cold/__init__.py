"""The cold tier (PostgreSQL): history past the hot window, exported from its detached
slices to a blob store as gzip'd JSON Lines, a file per day and tenant, with a manifest per
slice (``export``, ``manifest``), read back by old-window run listings and a cold run's
detail (``reads``, ``listing``); ``tier`` is what the maintenance and the store hold.
See docs/history.md."""
