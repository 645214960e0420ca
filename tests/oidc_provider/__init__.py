"""A real OpenID Connect provider for the sign-in tests: django-oauth-toolkit, served by
``serve.py`` in a subprocess of the test (``provider.py`` starts and stops it)."""
