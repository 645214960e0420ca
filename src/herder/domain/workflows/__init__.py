"""Workflows: DAGs of jobs whose tasks start as their trigger rules allow (issue 12)."""
