"""The database's primary lost under load, then its standby (issue 43), at both isolation
levels: ``bench/failover.py`` measures it on a real pg_auto_failover formation (a monitor, a
primary and its synchronous standby, ``scripts/ha-postgres.sh``) under a server with its
control loops and a worker; this test holds its counts to zero. How long writes stopped is
the bench's figure (``make bench``, bench/RESULTS.md), not asserted here.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from bench import failover

from herder.worker.isolation import Isolation

pytestmark = [pytest.mark.system, pytest.mark.postgres]


# A formation, a server and a worker, two losses and their recoveries: about 35 s alone.
@pytest.mark.timeout(400)
@pytest.mark.parametrize("isolation", [Isolation.NONE, Isolation.SANDBOX])
def test_the_primary_then_its_standby_lost_under_load_loses_and_doubles_nothing(
    tmp_path: Path, isolation: Isolation
) -> None:
    if shutil.which("pg_autoctl") is None:
        message = "pg_auto_failover is not installed (make test-packages installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    result = failover.measure(tmp_path, isolation)
    print(result.line())  # the figures, for whoever reads the log
    assert result.non_503_errors == 0, "an answer other than 503 while the primary was lost"
    assert result.lost == 0, "an acknowledged run is missing"
    assert result.doubled == 0, "a key made two runs, or a run succeeded twice"
    assert (result.fires_missed, result.fires_doubled) == (0, 0)
    assert result.orphans == 0, "an attempt left running or a run never ended"
    assert result.degraded_writes >= failover.ACKNOWLEDGED_AFTER  # the primary alone takes writes
    assert result.workflow_succeeded, "the workflow running through the failover did not succeed"
