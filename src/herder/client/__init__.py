"""A typed Python client for the Herder API, used by the CLI, the tests and users.

from herder.client import HerderClient
with HerderClient("http://127.0.0.1:8080", key) as herder:
    artifact = herder.upload_artifact(Path("hello.py"))
    job = herder.create_job("hello", {"runtime": "python", "artifact": artifact.id})
    run = herder.wait(herder.start_run(job.id).id)

The modules, one group of calls each, mixed into ``HerderClient``:

    herder_client  HerderClient: the connection, artifacts, jobs, queue, stats, workers,
                   tenants
    runs           runs: start, read, list, stop, rerun, checkpoints, logs, wait
    schedules      schedules, their fires and events, cron previews
    workflows      workflows, workflow runs, repair, backfills
    alerts         alert channels, rules, incidents, deliveries
    admin          API keys, the audit log
    secrets        secrets (a value goes up, only metadata comes back)
    pools          resource pools, their autoscaling and forecasts
    limits         flow-control limits
    usage          usage and budgets
    events         events, their triggers, inbound webhooks and their deliveries
    uploads        an artifact's multipart body, streamed with progress
    pages          the page a listing call takes (limit, cursor, id_prefix) as its query
    errors         what the client raises: ClientError ⊃ ServerUnreachable, ApiError
    retries        which calls are sent again while the server is lost for a moment
"""

from __future__ import annotations

from herder.client.errors import ApiError, ClientError, ServerUnreachable
from herder.client.herder_client import HerderClient
from herder.client.retries import Retries
from herder.client.runs import Logs
from herder.client.uploads import UploadProgress

__all__ = [
    "ApiError",
    "ClientError",
    "HerderClient",
    "Logs",
    "Retries",
    "ServerUnreachable",
    "UploadProgress",
]
