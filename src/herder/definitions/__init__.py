"""Jobs as code: definitions files (YAML) of jobs, workflows and schedules, and the pure diff
between them and what a tenant has. ``herder apply`` and ``herder export`` (``cli/apply.py``)
do the I/O:

    files ──documents.load──► Definitions ──plan.plan(existing)──► Plan ──cli/apply──► API
    API ──existing──► export.document ──► YAML (applying it again changes nothing)
    one workflow's YAML (the dashboard's editor) ──workflow_text.check──► problems by line, graph
"""
