"""Herder: a distributed job scheduler."""

__version__ = "0.1.0"
