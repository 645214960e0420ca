"""History that lasts: time-sliced partitions of the history tables on PostgreSQL
(``partitions``), the unique keys they cannot hold themselves (``guards``), and retention on
both stores (``retention``)."""
