"""The application layer: one use case per function, between the API's routers and the store.

    router (HTTP: parse, status, headers) → service (orchestrate) → domain (decide)
                                                                  → store (apply, one transaction)

A router parses a request, calls one function here and turns its answer into HTTP. A function
here knows no HTTP: it asks the domain to decide and the store to apply, and when a decision
depends on what is stored (a PATCH merged onto a job, a schedule's first fire from its current
spec) it hands the decision to the store to make inside the writing transaction, so nothing
is read in one transaction and written from in another. Errors are the domain's
(``herder.domain.errors``); the API maps them to HTTP in one place.

Every use case of the API has its function here, even one that only calls one repository
(list a run's events, create a job from a validated body): a router never reaches the store
itself (``tests/unit/test_layers.py``), so where a use case lives is never a choice.
"""
