"""Runs and attempts: what users submit and read, and every write the lifecycle makes.

repository.py  runs as users see them: submit, read, list, cancel, re-run
attempts.py    what workers report of their attempts: output and how each ended
placement.py   the dispatcher's plan applied: placing attempts on workers and preempting
placing.py     starting the placements that still fit, their workers locked and measured
hand_off.py    a report's hand-off: its worker held, the runs it queued started there
snapshot.py    what the dispatcher reads: the fleet, the tenants, the head of the queue
due.py         what has become due for the reaper
queue.py       the queue as users see it
facts.py       reading what lifecycle decisions need, runs locked
writes.py      applying a decision's changes: guarded, set-based statements
"""
