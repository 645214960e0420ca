"""Workflows in the store: definitions and their versions, workflow runs, and how a run's
tasks move on inside the unit of work that ends one of them."""
