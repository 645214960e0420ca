"""A schedule's ETag: a number drawn from its definition, sent with every schedule a GET, POST
or PATCH answers, unmoved by what is not its definition (a pause, a fire); If-Match on PATCH
(412 when stale), on both stores."""

from __future__ import annotations

import re
from typing import Any

from httpx import Response

from tests.integration.conftest import Api


def _create(api: Api) -> Response:
    job = api.create_job("nightly")
    response: Response = api.http.post(
        "/v1/schedules", headers=api.admin, json={"job_id": job["id"], "cron": "0 3 * * *"}
    )
    assert response.status_code == 201, response.text
    return response


def _patch(api: Api, schedule_id: object, body: dict[str, Any], **headers: str) -> Response:
    response: Response = api.http.patch(
        f"/v1/schedules/{schedule_id}", headers={**api.admin, **headers}, json=body
    )
    return response


def test_the_etag_names_the_definition_and_outlives_a_pause_and_a_fire(api: Api) -> None:
    created = _create(api)
    etag = created.headers["ETag"]
    assert re.fullmatch(r'"\d+"', etag), etag
    schedule_id = created.json()["id"]
    path = f"/v1/schedules/{schedule_id}"
    assert api.http.get(path, headers=api.admin).headers["ETag"] == etag
    assert api.http.post(f"{path}/pause", headers=api.admin).status_code == 200
    assert api.http.post(f"{path}/trigger", headers=api.admin).status_code == 201
    assert api.http.post(f"{path}/resume", headers=api.admin).status_code == 200
    assert api.http.get(path, headers=api.admin).headers["ETag"] == etag
    changed = _patch(api, schedule_id, {"cron": "0 4 * * *"}, **{"If-Match": etag})
    assert changed.status_code == 200, changed.text
    assert changed.json()["spec"]["cron"] == "0 4 * * *"
    assert changed.headers["ETag"] not in (etag, "")
    assert api.http.get(path, headers=api.admin).headers["ETag"] == changed.headers["ETag"]


def test_a_patch_against_a_definition_changed_since_is_refused_with_412(api: Api) -> None:
    created = _create(api)
    schedule_id, read = created.json()["id"], created.headers["ETag"]
    meanwhile = _patch(api, schedule_id, {"jitter_seconds": 30})  # no If-Match: applies
    assert meanwhile.status_code == 200, meanwhile.text
    stale = _patch(api, schedule_id, {"cron": "0 5 * * *"}, **{"If-Match": read})
    assert stale.status_code == 412, stale.text
    assert stale.headers["content-type"] == "application/problem+json"
    problem = stale.json()
    assert problem["title"] == "Precondition failed"
    assert "read it again" in problem["detail"]
    assert f'"{problem["current_version"]}"' == meanwhile.headers["ETag"]
    after = api.http.get(f"/v1/schedules/{schedule_id}", headers=api.admin).json()
    assert (after["spec"]["cron"], after["spec"]["jitter_seconds"]) == ("0 3 * * *", 30)
    either = f"{read}, {meanwhile.headers['ETag']}"
    assert (
        _patch(api, schedule_id, {"cron": "0 5 * * *"}, **{"If-Match": either}).status_code == 200
    )
    assert _patch(api, schedule_id, {"cron": "0 6 * * *"}, **{"If-Match": "*"}).status_code == 200


def test_hostile_if_match_values_are_a_422_naming_it_and_a_weak_tag_never_matches(
    api: Api,
) -> None:
    created = _create(api)
    schedule_id, etag = created.json()["id"], created.headers["ETag"]
    for value in ("3", '"abc"', '"', "<script>", '"1" "2"'):
        refused = _patch(api, schedule_id, {"cron": "0 1 * * *"}, **{"If-Match": value})
        assert refused.status_code == 422, (value, refused.text)
        assert refused.json()["errors"][0]["field"] == "If-Match"
    superscript = api.http.patch(  # a digit to str.isdigit, not to int: latin-1 in a header
        f"/v1/schedules/{schedule_id}",
        headers={**api.admin, "If-Match": b'"\xb2"'},
        json={"cron": "0 1 * * *"},
    )
    assert superscript.status_code == 422, superscript.text
    weak = _patch(api, schedule_id, {"cron": "0 1 * * *"}, **{"If-Match": f"W/{etag}"})
    assert weak.status_code == 412
    too_long = _patch(api, schedule_id, {"cron": "0 1 * * *"}, **{"If-Match": '"1",' * 400})
    assert too_long.status_code == 422


def test_another_tenants_schedule_is_not_found_whatever_its_if_match(api: Api) -> None:
    created = _create(api)
    other = api.as_key(api.other_tenant_key())
    response = api.http.patch(
        f"/v1/schedules/{created.json()['id']}",
        headers={**other, "If-Match": created.headers["ETag"]},
        json={"cron": "0 1 * * *"},
    )
    assert response.status_code == 404
