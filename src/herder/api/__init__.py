"""The HTTP API: REST /v1 for people and the worker protocol for workers."""
