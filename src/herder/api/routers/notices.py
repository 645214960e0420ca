"""/v1/jobs/{job_id}/notices: the caller's own notices of a job (``herder job notify``) —
told when its runs fail, time out, miss their deadline or an approval waits — made of an
alert channel and rules of the tenant's, marked as the notices' (docs/alerts.md, "A job's
notices").

Operators and above subscribe: a subscription makes the server write outside Herder (an
email through the cell's relay, a Slack post), which is acting, not reading; the operator is
the on-call role that acts on what it is told. Any role reads its own."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response, status

from herder.api.auth import Caller, Operator, StoreDep
from herder.api.openapi import problems
from herder.app import notices
from herder.domain.alerts.notices import JobNotice, NoticeRequest

router = APIRouter(tags=["alerts"])


@router.put("/v1/jobs/{job_id}/notices", responses=problems(404, 409))
def subscribe(
    job_id: str, body: NoticeRequest, caller: Operator, store: StoreDep, request: Request
) -> JobNotice:
    """Be told of the job's runs: ``on`` some of ``failed``, ``timed_out``,
    ``deadline_missed``, ``approval``; ``to`` an address (mailto:), a Slack incoming
    webhook's URL or an alert channel's name, else the signed-in person's email. Replaces
    the caller's notices of the job."""
    allow_private = bool(request.app.state.settings.allow_private_alert_targets)
    return notices.subscribe(store, caller, job_id, body, allow_private=allow_private)


@router.get("/v1/jobs/{job_id}/notices", responses=problems(404))
def get_notices(job_id: str, caller: Caller, store: StoreDep) -> JobNotice:
    """The caller's notices of the job; 404 when it has none."""
    return store.job_notices.get(caller.tenant_id, job_id, caller.actor)


@router.delete(
    "/v1/jobs/{job_id}/notices",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=problems(404),
)
def unsubscribe(job_id: str, caller: Operator, store: StoreDep) -> Response:
    """No more notices of the job to the caller: its rules and own channel go."""
    store.job_notices.unsubscribe(caller.tenant_id, job_id, caller.actor)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
