"""The use cases: one function each, between the edges (routers, loops, CLI server side) and
the store (docs/design.md §1).

Every use case has one shape, in one transaction: read the facts (the store's readers, rows
locked where a decision depends on them), let the domain decide, apply the ``Changes`` (the
store's one applier), then work through what the apply says follows (workflow runs and
backfills to move on, held runs to release) until nothing is pending, and record. The store
never calls back into this package.
"""
