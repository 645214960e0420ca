"""The hook schemes' signature parsing (``domain.hooks``): whatever a sender puts in its
headers, a delivery is verified or refused — ``Unverified`` or ``Malformed``, never another
error (a 500); Herder's ``v2`` binds the delivery id and the kind; a header that signs or
selects a delivery may come once."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from herder.domain.alerts.webhooks import signature
from herder.domain.hooks import (
    SIGNING_HEADERS,
    HookScheme,
    Malformed,
    Unverified,
    single_headers,
    verify,
)

SECRET = "whsec_0123456789abcdef"
NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
T = int(NOW.timestamp())
BODY = json.dumps({"order": 42}).encode()

latin1 = st.text(st.characters(max_codepoint=0xFF, exclude_categories=["Cs"]), max_size=80)
header_values = st.one_of(
    latin1,
    st.builds(lambda value: f"t={value}", latin1),
    st.builds(lambda stamp, value: f"t={stamp},v1={value}", latin1, latin1),
    st.builds(lambda value: f"t={T},v2={value}", latin1),
    st.builds(lambda value: f"sha256={value}", latin1),
    st.builds(lambda tail: f"{signature(SECRET, T, BODY)}{tail}", latin1),
)
headers_of = {
    HookScheme.HERDER: "x-herder-signature",
    HookScheme.GITHUB: "x-hub-signature-256",
    HookScheme.STRIPE: "stripe-signature",
}


@given(scheme=st.sampled_from(HookScheme), value=header_values, delivery=latin1, kind=latin1)
def test_any_signature_header_is_verified_or_refused_never_an_error(
    scheme: HookScheme, value: str, delivery: str, kind: str
) -> None:
    headers = {
        headers_of[scheme]: value,
        "x-herder-delivery": delivery,
        "x-herder-event": kind,
        "x-github-delivery": delivery,
        "x-github-event": kind,
    }
    with contextlib.suppress(Unverified, Malformed):  # anything else fails the test
        verify(scheme, SECRET, headers, BODY, NOW)


@pytest.mark.parametrize("stamp", ["²", "1²", "¹²³", "١٢٣", "+1", "-1", " ", "0x10", "1" * 13])
def test_a_time_of_anything_but_ascii_digits_is_unverified(stamp: str) -> None:
    with pytest.raises(Unverified, match="not t=<unix seconds>"):
        verify(HookScheme.HERDER, SECRET, {"x-herder-signature": f"t={stamp},v1=00"}, BODY, NOW)


def herder(delivery: str, kind: str | None, value: str) -> dict[str, str]:
    headers = {"x-herder-signature": value, "x-herder-delivery": delivery}
    return headers if kind is None else {**headers, "x-herder-event": kind}


def test_v2_binds_the_delivery_id_and_the_kind_and_v1_only_the_body() -> None:
    v2 = signature(SECRET, T, BODY, delivery="d-1", event="paid")
    as_documented = f"{T}\nd-1\npaid\n".encode() + BODY  # docs/events.md, docs/alerts.md
    assert v2.endswith(
        f",v2={hmac.new(SECRET.encode(), as_documented, hashlib.sha256).hexdigest()}"
    )
    assert verify(HookScheme.HERDER, SECRET, herder("d-1", "paid", v2), BODY, NOW).kind == "paid"
    for delivery, kind in [("d-2", "paid"), ("d-1", "refunded"), ("d-1", None)]:
        with pytest.raises(Unverified, match="does not match"):
            verify(HookScheme.HERDER, SECRET, herder(delivery, kind, v2), BODY, NOW)
    v1 = signature(SECRET, T, BODY)  # an older sender's: its headers are not its own
    assert verify(HookScheme.HERDER, SECRET, herder("d-2", "refunded", v1), BODY, NOW)


def test_what_a_replay_is_known_by_is_the_signed_time_and_body_whatever_the_headers() -> None:
    v1 = signature(SECRET, T, BODY)
    v2 = signature(SECRET, T, BODY, delivery="d-1", event="paid")
    digests = {
        verify(HookScheme.HERDER, SECRET, herder(delivery, kind, value), BODY, NOW).signed_digest
        for delivery, kind, value in [("d-1", "paid", v2), ("d-1", "paid", v1), ("d-9", None, v1)]
    }
    assert len(digests) == 1  # stripping v2 does not make a delivery new
    later = signature(SECRET, T + 1, BODY, delivery="d-1", event="paid")
    signed_anew = verify(HookScheme.HERDER, SECRET, herder("d-1", "paid", later), BODY, NOW)
    assert signed_anew.signed_digest not in digests


@pytest.mark.parametrize("name", sorted(SIGNING_HEADERS))
def test_a_header_that_signs_or_selects_a_delivery_may_come_once(name: str) -> None:
    with pytest.raises(Unverified, match="twice"):
        single_headers([(name.upper(), "a"), ("Content-Type", "application/json"), (name, "b")])
    assert single_headers([("Accept", "a"), ("accept", "b")]) == {"accept": "b"}
