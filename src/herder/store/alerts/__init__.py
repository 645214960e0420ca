"""Alerts in the store: channels and rules (per tenant), the incidents the evaluator opens
and resolves, and the deliveries the sender works through."""
