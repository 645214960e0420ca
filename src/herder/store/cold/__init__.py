"""The cold tier (PostgreSQL): history past the hot window, exported from its detached
slices to a blob store as gzip'd JSON Lines, a file per day and tenant, with a manifest per
slice (``export``, ``manifest``), and their attempts' compacted logs as a log file per day
and tenant (``log_export``, ``log_files``); read back by old-window run listings, a cold
run's detail (``reads``, ``listing``) and its logs (``log_reads``); ``tier`` is what the
maintenance and the store hold.
See docs/history.md."""
