"""The ``created_by`` filter's values (``domain.actors.creator_wanted``) and a creator as
the CLI shows it (``cli.creators.creator_shown``), as tables."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from herder.cli.creators import creator_shown
from herder.domain.actors import creator_wanted, schedule_actor
from herder.domain.errors import Invalid
from herder.domain.jobs import JobSpec
from herder.domain.models import Job

ME = "user:key_01M98VYJHT019WKZPDK15G8K10"


@pytest.mark.parametrize(
    ("value", "wanted"),
    [
        ("me", ME),
        ("user:key_01ABC", "user:key_01ABC"),
        ("user:usr_01ABC", "user:usr_01ABC"),
        ("schedule:sch_01ABC", "schedule:sch_01ABC"),
        ("event:evt_01ABC", "event:evt_01ABC"),
        ("backfill:bkf_01ABC", "backfill:bkf_01ABC"),
        ("workflow:wfrun_01ABC", "workflow:wfrun_01ABC"),
        ("scheduler:firer-3", "scheduler:firer-3"),
        ("worker:wrk_01ABC", "worker:wrk_01ABC"),
    ],
)
def test_me_is_the_caller_and_an_actor_is_itself(value: str, wanted: str) -> None:
    assert creator_wanted(value, ME) == wanted


@pytest.mark.parametrize(
    "value",
    ["", "ME", " me", "user:", "user", "key_01", "robot:x", "user:-x", "user:a b", "user:a'",
     "user:a\x00", "user:\u202ea", "user:" + "a" * 124, "user:key_01\n"],
)  # fmt: skip
def test_anything_else_is_invalid_naming_the_field(value: str) -> None:
    with pytest.raises(Invalid) as refused:
        creator_wanted(value, ME)
    assert refused.value.field == "created_by"


def job(created_by: str | None, name: str | None = None) -> Job:
    moment = datetime(2026, 12, 7, tzinfo=UTC)
    return Job(
        id="job_01", name="j", spec=JobSpec(runtime="shell", command="true"),
        created_at=moment, updated_at=moment, version=1,
        created_by=created_by, created_by_name=name,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("created_by", "name", "shown"),
    [
        (ME, "deployer", "deployer"),  # a person by name, as run events name them
        (ME, None, ME),  # a key since deleted: the actor alone
        (schedule_actor("sch_01"), None, "schedule:sch_01"),
        (None, None, "unknown"),  # made before creators were kept
    ],
)
def test_a_creator_is_shown_by_name_where_it_has_one(
    created_by: str | None, name: str | None, shown: str
) -> None:
    assert creator_shown(job(created_by, name)) == shown
