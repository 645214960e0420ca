"""Going (issue 42): the use cases moved to ``herder.app``, and a router calls the store's
repositories itself for a plain read or write. What remains here (events, hooks, runs,
triggers, workers) moves out too, and then the package goes."""
