"""Alerts: per-tenant channels (signed webhooks, email, Slack) and rules whose incidents open
once and resolve once, decided by pure functions here and applied by the store."""
