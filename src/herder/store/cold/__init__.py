"""The cold tier (PostgreSQL): history past the hot window, exported from its detached
slices to a blob store as gzip'd JSON Lines, a file per day and tenant, with a manifest per
slice (``export``), read back by old-window run listings (``reads``). See docs/history.md."""
