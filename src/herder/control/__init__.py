"""The control loops, each run by one process at a time under a lease."""
