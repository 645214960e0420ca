"""Which cell the edge sends a request to, from the request alone (``edge/routing.py``): the
key's tenant, a hook address's tenant, else the default cell; no header picks a cell."""

from __future__ import annotations

import pytest

from herder.edge.routing import Destination, Malformed, ToDefault, ToTenant, destination

TENANT = "ten_01M8H1Z0C3R7Q2W5E9T4Y6V8XP"
KEY = f"Bearer {TENANT}.key_01M8H2D6Q0X3V1M9T7Y4B5K8ZP.secret"


@pytest.mark.parametrize(
    ("method", "path", "authorization", "expected"),
    [
        ("GET", "/v1/jobs", KEY, ToTenant(TENANT)),
        ("POST", "/v1/jobs/x/runs", KEY.replace("Bearer", "bearer"), ToTenant(TENANT)),
        ("GET", "/v1/jobs", "Bearer key_01.secret", ToDefault()),  # made before cells
        ("GET", "/v1/jobs", None, ToDefault()),
        ("GET", "/", None, ToDefault()),  # the dashboard's page
        ("POST", "/v1/workers", "Bearer wtk_01.secret", ToDefault()),
        ("GET", "/v1/jobs", "Basic dXNlcjpwYXNz", ToDefault()),
        ("GET", "/v1/jobs", "Bearer ../x.key_01.secret", ToDefault()),  # no key: refused there
        ("GET", "/v1/jobs", "Bearer ten_%2F.key_01.secret", Malformed()),
        ("GET", "/v1/jobs", "Bearer ten_a/b.key_01.secret", Malformed()),
        ("GET", "/v1/jobs", f"Bearer ten_{'A' * 65}.key_01.secret", Malformed()),
        # an inbound hook: its address names the tenant, whatever key comes with it
        ("POST", f"/v1/hooks/{TENANT}.hook_01", None, ToTenant(TENANT)),
        ("POST", f"/v1/hooks/{TENANT}.hook_01/", "Bearer ten_OTHER.key_1.s", ToTenant(TENANT)),
        ("POST", "/v1/hooks/hook_01", None, ToDefault()),
        ("POST", "/v1/hooks/x..hook_01", None, Malformed()),
        # not a delivery: the key decides
        ("GET", f"/v1/hooks/{TENANT}.hook_01", KEY, ToTenant(TENANT)),
        ("POST", "/v1/hooks/ten_OTHER.hook_01/secret", KEY, ToTenant(TENANT)),
        ("POST", "/v1/hooks", KEY, ToTenant(TENANT)),
    ],
)
def test_the_destination_of_a_request(
    method: str, path: str, authorization: str | None, expected: Destination
) -> None:
    assert destination(method, path, authorization) == expected
