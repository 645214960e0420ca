#!/usr/bin/env bash
# A PostgreSQL server of `make test`'s own, made with the installed server binaries in a new
# directory and on a free port: `start DIR` prints its URL (the tests' HERDER_TEST_POSTGRES_URL),
# `stop DIR` stops it and removes DIR. Every test clones and drops databases, and PostgreSQL
# waits for a checkpoint in every DROP DATABASE: on a server that syncs to disk, and shares it
# with whatever else runs, those waits were most of the suite's time. This one never syncs
# (a crash of the machine would lose nothing the tests keep) and takes the connections of
# every test process at once. Prints nothing and fails when no server binaries are installed.
# `crash DIR` stops it at once (as a kill -9 would: no shutdown checkpoint) and `resume DIR`
# starts it again on the same port, for tests of a database lost under a running system: with
# DURABLE=1 at its start, a commit is written out before it is acknowledged (not synced: only
# the server dies, never the machine), so a crash loses none. With TLS_CERT and TLS_KEY (PEM
# files) at its start, it serves TLS with them, and takes only TLS connections over TCP.
set -euo pipefail
action=$1
directory=$2
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
as_owner=()
if [ "$(id -u)" = 0 ]; then as_owner=(runuser -u postgres --); fi

if [ "$action" = stop ]; then  # whether or not a server was started in it
    if [ -n "$bin" ] && [ -d "$directory/data" ]; then
        "${as_owner[@]}" "$bin/pg_ctl" -D "$directory/data" -m immediate stop >/dev/null || true
    fi
    rm -rf "$directory"
    exit 0
fi
[ -n "$bin" ] || exit 1
if [ "$action" = crash ]; then
    exec "${as_owner[@]}" "$bin/pg_ctl" -D "$directory/data" -m immediate stop >/dev/null
fi
if [ "$action" = resume ]; then
    exec "${as_owner[@]}" "$bin/pg_ctl" -D "$directory/data" -l "$directory/server.log" -w \
        -o "$(cat "$directory/options")" start >/dev/null
fi
# A server that would not start says why before the tests fall back to the machine's.
trap '[ -f "$directory/server.log" ] && cat "$directory/server.log" >&2' ERR

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$directory"
[ "$(id -u)" = 0 ] && chown postgres "$directory"
"${as_owner[@]}" "$bin/initdb" -D "$directory/data" --auth=trust -U postgres --no-sync >/dev/null
options="-p $port -k $directory -c listen_addresses=127.0.0.1 -c max_connections=400"
options+=" -c fsync=off -c full_page_writes=off"
[ "${DURABLE:-0}" = 1 ] || options+=" -c synchronous_commit=off"
if [ -n "${TLS_CERT:-}" ]; then
    install -m 0644 "$TLS_CERT" "$directory/server.crt"
    install -m 0600 "$TLS_KEY" "$directory/server.key"
    [ "$(id -u)" = 0 ] && chown postgres "$directory/server.crt" "$directory/server.key"
    options+=" -c ssl=on -c ssl_cert_file=$directory/server.crt -c ssl_key_file=$directory/server.key"
    hba="$directory/data/pg_hba.conf"
    sed -i 's/^host\(\s\)/hostssl\1/' "$hba"
    grep -q '^hostnossl' "$hba" || echo 'hostnossl all all 0.0.0.0/0 reject' >> "$hba"
fi
echo "$options" > "$directory/options"
"${as_owner[@]}" "$bin/pg_ctl" -D "$directory/data" -l "$directory/server.log" -w -o "$options" \
    start >/dev/null
if [ "$(id -un)" != postgres ]; then
    psql -h 127.0.0.1 -p "$port" -U postgres -qc "CREATE ROLE \"$(id -un)\" SUPERUSER LOGIN"
fi
psql -h 127.0.0.1 -p "$port" -U postgres -qc "CREATE DATABASE test"
echo "postgresql://127.0.0.1:$port/test"
