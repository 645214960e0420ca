"""Every rule of a run's life, as pure functions over plain facts (docs/design.md §3).

Each decision returns ``Changes`` — guarded transitions, events to record, notices to send —
which the store's unit of work applies in one transaction. Nothing here reads a clock, a
database or a random source of its own: ``now`` and ``rng`` are arguments.

    facts.py        what a decision reads: a run, its current attempt's members
    changes.py      what a decision returns, and the one rule of what a transition also sets
    stops.py        a cancel wins over a suspend, a suspend over a preemption
    settle.py       an attempt ended (reported, lost, timed out, stopped): the run moves on
    cancel.py       a user's cancel, a schedule's replace, a re-run
    suspend.py      a run held until resumed, and its resume
    concurrency.py  a schedule's concurrency policy: allow, forbid, replace
    reap.py         silent workers, overdue attempts, due retries, start deadlines
    missed.py       a run past its deadline: a timeline line, and the cancel it asks for
"""
