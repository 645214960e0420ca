#!/usr/bin/env bash
# A PostgreSQL formation that fails over, on this machine, for the tests and for trying it:
# pg_auto_failover's monitor and two nodes (a primary and a synchronous standby), each in its
# own directory under DIR and on its own free loopback port. Usage:
#
#   scripts/ha-postgres.sh up DIR        make and start it; prints Herder's database URL
#   scripts/ha-postgres.sh status DIR    the nodes' states, as the monitor sees them
#   scripts/ha-postgres.sh events DIR    the monitor's last 40 events (each state change, why)
#   scripts/ha-postgres.sh primary DIR   the number (1 or 2) of the node that is primary now
#   scripts/ha-postgres.sh crash DIR N   kill -9 node N's keeper and postgres: a machine lost
#   scripts/ha-postgres.sh start DIR N   start node N again: it rejoins as a standby
#   scripts/ha-postgres.sh down DIR      stop everything and remove DIR
#
# The monitor's timings are cut for a test box (a node silent 2 s is unhealthy; a primary
# that cannot be reached is not waited for past 3 s), so a lost primary is replaced in about
# 5 s; production keeps pg_auto_failover's defaults or tunes them the same way
# (docs/availability.md). Synchronous replication stays on while both nodes run, so a
# commit acknowledged before the primary died is on the standby that takes over; with one
# node left, it accepts writes alone (degraded) until the other rejoins.
set -euo pipefail
action=$1
directory=$2
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
as_owner=(env "PATH=$bin:$PATH")
if [ "$(id -u)" = 0 ]; then as_owner=(runuser -u postgres -- env "PATH=$bin:$PATH"); fi
autoctl() { "${as_owner[@]}" pg_autoctl "$@"; }

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start_node() {  # its keeper, in a process group of its own (crash kills the group)
    local node=$1
    setsid "${as_owner[@]}" pg_autoctl run --pgdata "$directory/node$node" \
        >>"$directory/node$node.log" 2>&1 </dev/null &
    echo $! >"$directory/node$node.pid"
}

state_of() {  # node N's reported state
    autoctl show state --pgdata "$directory/monitor" 2>/dev/null |
        awk -F'|' -v name="node_$1" '$1 ~ name { gsub(/ /, "", $6); print $6 }'
}

wait_for() {  # until node A reports primary and node B secondary, or 90 s
    local primary=$1 standby=$2
    for _ in $(seq 450); do
        if [ "$(state_of "$primary")" = primary ] && [ "$(state_of "$standby")" = secondary ]; then
            return 0
        fi
        sleep 0.2
    done
    echo "ha-postgres: the formation did not settle; see $directory/*.log" >&2
    autoctl show state --pgdata "$directory/monitor" >&2 || true
    return 1
}

case "$action" in
up)
    command -v pg_autoctl >/dev/null || {
        echo "ha-postgres: pg_autoctl is missing (make test-packages installs it)" >&2
        exit 1
    }
    mkdir -p "$directory"
    [ "$(id -u)" = 0 ] && chown postgres "$directory"
    monitor_port=$(free_port)
    common=(--hostname 127.0.0.1 --listen 127.0.0.1 --auth trust --no-ssl)
    autoctl create monitor --pgdata "$directory/monitor" --pgport "$monitor_port" \
        "${common[@]}" >"$directory/monitor.log" 2>&1
    setsid "${as_owner[@]}" pg_autoctl run --pgdata "$directory/monitor" \
        >>"$directory/monitor.log" 2>&1 </dev/null &
    echo $! >"$directory/monitor.pid"
    monitor="postgres://autoctl_node@127.0.0.1:$monitor_port/pg_auto_failover?sslmode=disable"
    for _ in $(seq 100); do
        psql -h 127.0.0.1 -p "$monitor_port" -U postgres -d pg_auto_failover -qAtc 'SELECT 1' \
            >/dev/null 2>&1 && break
        sleep 0.1
    done
    psql -h 127.0.0.1 -p "$monitor_port" -U postgres -d pg_auto_failover -qAt \
        -c "ALTER SYSTEM SET pgautofailover.health_check_period = 1000" \
        -c "ALTER SYSTEM SET pgautofailover.health_check_timeout = 1000" \
        -c "ALTER SYSTEM SET pgautofailover.health_check_max_retries = 1" \
        -c "ALTER SYSTEM SET pgautofailover.health_check_retry_delay = 500" \
        -c "ALTER SYSTEM SET pgautofailover.node_considered_unhealthy_timeout = 2000" \
        -c "ALTER SYSTEM SET pgautofailover.primary_demote_timeout = 3000" \
        -c "SELECT pg_reload_conf()" >/dev/null
    ports=()
    for node in 1 2; do  # one after the other: the first becomes the primary
        port=$(free_port)
        ports+=("$port")
        autoctl create postgres --pgdata "$directory/node$node" --pgport "$port" \
            --name "node_$node" --dbname herder --monitor "$monitor" "${common[@]}" \
            >"$directory/node$node.log" 2>&1
        start_node "$node"
        [ "$node" = 1 ] && for _ in $(seq 300); do
            [ "$(state_of 1)" = single ] && break
            sleep 0.2
        done
    done
    wait_for 1 2
    echo "postgresql://postgres@127.0.0.1:${ports[0]},127.0.0.1:${ports[1]}/herder?target_session_attrs=read-write"
    ;;
status)
    autoctl show state --pgdata "$directory/monitor"
    ;;
events)
    autoctl show events --pgdata "$directory/monitor" --count 40
    ;;
primary)
    for node in 1 2; do
        [ "$(state_of "$node")" = primary ] && echo "$node" && exit 0
    done
    exit 1
    ;;
crash)
    kill -KILL -- "-$(cat "$directory/node$3.pid")" 2>/dev/null || true
    ;;
start)
    start_node "$3"
    ;;
down)
    for part in node1 node2 monitor; do
        [ -f "$directory/$part.pid" ] && kill -TERM -- "-$(cat "$directory/$part.pid")" 2>/dev/null || true
    done
    for _ in $(seq 50); do
        alive=0
        for part in node1 node2 monitor; do
            [ -f "$directory/$part.pid" ] && kill -0 -- "-$(cat "$directory/$part.pid")" 2>/dev/null && alive=1
        done
        [ "$alive" = 0 ] && break
        sleep 0.2
    done
    for part in node1 node2 monitor; do
        [ -f "$directory/$part.pid" ] && kill -KILL -- "-$(cat "$directory/$part.pid")" 2>/dev/null || true
    done
    rm -rf "$directory"
    ;;
*)
    echo "usage: $0 up|status|primary|down DIR, or crash|start DIR N" >&2
    exit 2
    ;;
esac
