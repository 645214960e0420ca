#!/usr/bin/env bash
# `make test`: the lint and the tests, all at once: the lint; the unit and integration tests
# (mostly CPU, and waits on PostgreSQL); and the system tests (real servers, workers and
# browsers; mostly waiting on them): first those on the outside host, one at a time (its
# addresses are the machine's, and they need a host with no other worker: every worker's
# filter applies to every attempt's interface), then the others. The unit and integration
# tests and the other system tests are spread over pytest-xdist workers, a module to a worker
# (-n, --dist loadfile), each worker with its own databases and directories; the longest
# modules are handed out first (tests/conftest.py's order, kept by --no-loadscope-reorder).
# Their PostgreSQL is a server of their own (scripts/test-postgres.sh), stopped at the end.
# What the lint and the system tests say is shown when all are done; any failure fails the
# whole. With arguments (PYTEST_ARGS: a path, -k, -n …) it is the lint, then one pytest over
# what they name.
set -u
cd "$(dirname "$0")/.."
# The suite starts hundreds of interpreters (pytest workers, servers, workers, CLI calls):
# with bytecode caches off (PYTHONDONTWRITEBYTECODE) each compiled herder's source again and
# each pytest process rewrote every test module again (collection: 9.8 s of CPU, 3.9 s cached).
unset PYTHONDONTWRITEBYTECODE
mkdir -p .test-results
cores=$(nproc)
TEST_PROCESSES=${TEST_PROCESSES:-$cores}              # unit and integration: mostly CPU
SYSTEM_PROCESSES=${SYSTEM_PROCESSES:-$((cores + 1))}  # system: mostly waiting on processes
if [ $# -gt 0 ]; then
    make --no-print-directory lint || exit
    [ -n "${HERDER_TEST_POSTGRES_URL:-}" ] || scripts/ensure-postgres.sh || exit
    exec .venv/bin/pytest --junitxml=.test-results/junit.xml "$@"
fi
rm -f .test-results/junit*.xml
pids=()  # each background part leads a process group of its own: stopped whole, torn down
postgres=$(mktemp -d "${TMPDIR:-/tmp}/herder-test-postgres.XXXXXX")
stop_all() {
    local pid
    for pid in "${pids[@]}"; do kill -INT -- "-$pid" 2>/dev/null; done  # pytest tears down
    for _ in $(seq 120); do  # a minute for their teardown
        alive=0
        for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        [ "$alive" -eq 0 ] && break
        sleep 0.5
    done
    for pid in "${pids[@]}"; do kill -KILL -- "-$pid" 2>/dev/null; done
    scripts/test-postgres.sh stop "$postgres"
}
trap stop_all EXIT
trap 'exit 130' INT TERM  # Ctrl-C stops every part, not only the one in the foreground
if [ -z "${HERDER_TEST_POSTGRES_URL:-}" ]; then
    if url=$(scripts/test-postgres.sh start "$postgres"); then
        export HERDER_TEST_POSTGRES_URL=$url
    else  # no server binaries, or it would not start: the machine's server on 5432
        scripts/ensure-postgres.sh || exit
    fi
fi
# `trap - INT`: a part started in the background would ignore Ctrl-C's INT (bash's rule
# without job control), and pytest then has no KeyboardInterrupt to tear its tests down on.
(trap - INT; exec setsid -w make --no-print-directory lint > .test-results/lint.log 2>&1) &
pids+=($!)
system_tests() {  # first those on the outside host, on a host with no other worker
    trap 'exit 130' INT  # stopped: no second phase
    .venv/bin/pytest tests/system -m outside_host \
        --junitxml=.test-results/junit-outside.xml > .test-results/outside.log 2>&1
    local outside=$?
    .venv/bin/pytest tests/system -m "not outside_host" -n "$SYSTEM_PROCESSES" --dist loadfile \
        --no-loadscope-reorder \
        --junitxml=.test-results/junit-system.xml > .test-results/system.log 2>&1 &&
        [ "$outside" -eq 0 ]
}
export -f system_tests
export SYSTEM_PROCESSES
(trap - INT; exec setsid -w bash -c system_tests) &
pids+=($!)
.venv/bin/pytest tests/unit tests/integration -n "$TEST_PROCESSES" --dist loadfile \
    --no-loadscope-reorder \
    --junitxml=.test-results/junit.xml
failed=$?
for pid in "${pids[@]}"; do
    wait "$pid" || failed=1
done
trap - EXIT
scripts/test-postgres.sh stop "$postgres"
for part in "system:system tests" "outside:system tests on the outside host" "lint:lint"; do
    echo
    echo "=== the ${part#*:}, run beside the others ==="
    cat ".test-results/${part%%:*}.log"
done
[ "$failed" -eq 0 ]
