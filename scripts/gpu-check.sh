#!/usr/bin/env bash
# GPUs on a real device, in one command (docs/isolation.md, "Checking GPUs on a real device").
#
# On a machine with an NVIDIA GPU, as root, from a clone of the repository: starts `herder up`
# in a throwaway home (its local worker discovers the GPUs with `nvidia-smi -L`), runs a job
# with gpus: 1 and a job with gpus: 0, each printing what its sandbox sees, checks that the
# first sees exactly its device and the second none, prints the results, stops everything.
#
# Exit codes: 0 every check passed; 1 a check failed; 2 no NVIDIA GPU here; 3 setup failed.
# At most CHECK_SECONDS (default 480) for the whole check once set up.
set -euo pipefail
cd "$(dirname "$0")/.."

NO_GPU=2
SETUP_FAILED=3
CHECK_SECONDS=${CHECK_SECONDS:-480}

if ! command -v nvidia-smi >/dev/null; then
    echo "gpu-check: no NVIDIA GPU here (nvidia-smi is not installed)"
    exit "$NO_GPU"
fi
if ! listing=$(nvidia-smi -L 2>&1) || ! grep -q '^GPU ' <<<"$listing"; then
    echo "gpu-check: no NVIDIA GPU here (nvidia-smi -L lists none: ${listing:-no output})"
    exit "$NO_GPU"
fi
echo "== the host's GPUs (nvidia-smi -L)"
echo "$listing"

# What it needs: the runtime in .venv (kept when there: a machine without a network can be
# handed one) and, as root, the compiler the sandbox launcher is built with.
if [ ! -x .venv/bin/herder ]; then
    make .venv/.runtime-installed || exit "$SETUP_FAILED"
fi
if [ "$(id -u)" = 0 ] && ! command -v cc >/dev/null && ! command -v gcc >/dev/null; then
    make system-packages || exit "$SETUP_FAILED"
fi
if [ "$(id -u)" != 0 ]; then
    echo "gpu-check: not root: the worker cannot sandbox jobs, so no device is hidden from them"
fi

home=$(mktemp -d -t herder-gpu-check.XXXXXX)
herder_pid=""
cleanup() {
    if [ -n "$herder_pid" ] && kill -0 "$herder_pid" 2>/dev/null; then
        kill -INT "$herder_pid" 2>/dev/null || true  # herder up stops its worker with it
        for _ in $(seq 100); do kill -0 "$herder_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$herder_pid" 2>/dev/null || true
    fi
    rm -rf "$home"
}
trap cleanup EXIT

port=$(.venv/bin/python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
HERDER_HOME=$home .venv/bin/herder up --port "$port" >"$home/herder.log" 2>&1 &
herder_pid=$!

status=0
timeout "$CHECK_SECONDS" .venv/bin/python scripts/gpu_check.py \
    "http://127.0.0.1:$port" "$home" "$herder_pid" || status=$?
if [ "$status" = 124 ]; then
    echo "gpu-check: FAILED: not done within ${CHECK_SECONDS}s"
fi
if [ "$status" != 0 ]; then
    echo "== herder up's log (last 40 lines)"
    tail -n 40 "$home/herder.log" || true
    exit 1
fi
