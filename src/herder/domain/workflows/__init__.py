"""Workflows: DAGs of jobs whose tasks start as their trigger rules allow (issue 12), and
every move of a workflow run as a pure function over plain facts returning ``Changes``
(``domain.lifecycle.changes``), which the store's unit of work applies.

    spec.py           a workflow's definition: tasks, dependencies, map_over, parameters
    dag.py            a version made ready for deciding: order, tasks by name, leaves
    trigger_rules.py  Airflow's twelve rules as a table
    states.py         the workflow-run states and their transition table
    admission.py      max_active_runs: start, queue or refuse; admit the queued as slots free
    progress.py       which pending tasks start or end without running; when the run ends
    outcome.py        how a run ended, in words: "succeeded, 2 tasks failed and were handled"
    task_runs.py      what a task's run is given, and the runs a decision's starts become
    walk.py           a task's end to its successors' start: the current repair, decided once
    repair.py         which tasks an ended run runs again, under the next repair token
    cancel.py         a queued run ends at once; a running one is asked to stop
    suspend.py        a running run suspended, starting nothing until resumed
    run_bound.py      how many runs one workflow run may make
    scheduled.py      a schedule's fires of a workflow under its concurrency policy
    models.py         workflows, their runs and tasks as the API shows them
"""
