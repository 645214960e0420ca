"""The worker agent: registers, claims attempts over HTTP and runs them sandboxed."""
