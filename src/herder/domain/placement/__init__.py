"""Placement policy: the dispatcher's pure decisions (see policy.py for the pipeline)."""
