"""The hand-over reads each small stored spec once a process, and never keeps a large one: a
tenant submitting many distinct large specs (long args, env) cannot grow the server's memory."""

from __future__ import annotations

from herder.domain.jobs import JobSpec, Runtime
from herder.store.handover import CACHED_SPEC_CHARS, _cached_spec, _spec_of


def test_a_small_spec_is_read_once_and_a_large_one_each_time() -> None:
    small = JobSpec(runtime=Runtime.SHELL, command="echo small").model_dump_json()
    large = JobSpec(
        runtime=Runtime.SHELL, command="true", args=["x" * 1000] * (CACHED_SPEC_CHARS // 1000)
    ).model_dump_json()
    assert len(large) > CACHED_SPEC_CHARS
    _cached_spec.cache_clear()
    assert _spec_of(small) is _spec_of(small)
    assert _spec_of(large) == _spec_of(large)
    assert _spec_of(large) is not _spec_of(large)
    assert _cached_spec.cache_info().currsize == 1
