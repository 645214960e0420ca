#!/usr/bin/env bash
# `make test`'s pytest: the system tests (real servers, workers and browsers; mostly waiting on
# them) run beside the unit and integration tests (mostly CPU), as two pytest processes, so the
# suite takes the longer of the two rather than their sum. Each has its own databases (named
# by process) and temporary directories. The system tests' output is shown when both are done.
# With arguments (PYTEST_ARGS: a path, -k, …) it is one pytest over what they name.
set -u
cd "$(dirname "$0")/.."
mkdir -p .test-results
if [ $# -gt 0 ]; then
    exec .venv/bin/pytest --junitxml=.test-results/junit.xml "$@"
fi
rm -f .test-results/junit-system.xml
.venv/bin/pytest tests/system --junitxml=.test-results/junit-system.xml \
    > .test-results/system.log 2>&1 &
system=$!
trap 'kill "$system" 2>/dev/null' EXIT
.venv/bin/pytest tests/unit tests/integration --junitxml=.test-results/junit.xml
rest=$?
wait "$system"
system_status=$?
trap - EXIT
echo
echo "=== the system tests (tests/system), run beside the others ==="
cat .test-results/system.log
[ "$rest" -eq 0 ] && [ "$system_status" -eq 0 ]
