#!/usr/bin/env bash
# Make sure a PostgreSQL server answers on 127.0.0.1:5432 for the tests.
# 1. already running: nothing to do;  2. the machine's cluster is installed but down: start it;
# 3. otherwise: a throwaway cluster under .pgdata, made with the installed server binaries.
set -euo pipefail
PORT="${HERDER_TEST_PG_PORT:-5432}"
ready() { pg_isready -q -h 127.0.0.1 -p "$PORT" 2>/dev/null; }
wait_ready() { for _ in $(seq 1 60); do ready && return 0; sleep 0.5; done; return 1; }

if ready; then exit 0; fi

if [ -d /etc/postgresql ] && command -v pg_ctlcluster >/dev/null; then
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  echo "PostgreSQL is down; starting cluster $version/main" >&2
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  if wait_ready; then exit 0; fi
fi

bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$bin" ]; then
  echo "no PostgreSQL server binaries found (install Debian's postgresql package)" >&2
  exit 1
fi
data="$(pwd)/.pgdata"
echo "starting a throwaway PostgreSQL cluster in $data" >&2
as_owner=()
if [ "$(id -u)" = 0 ]; then as_owner=(runuser -u postgres --); fi
if [ ! -f "$data/PG_VERSION" ]; then
  mkdir -p "$data"
  [ "$(id -u)" = 0 ] && chown postgres "$data"
  "${as_owner[@]}" "$bin/initdb" -D "$data" --auth=trust -U postgres >/dev/null
fi
"${as_owner[@]}" "$bin/pg_ctl" -D "$data" -o "-p $PORT -k /tmp -c listen_addresses=127.0.0.1" \
  -l "$data/server.log" start >/dev/null
wait_ready
psql -h 127.0.0.1 -p "$PORT" -U postgres -tc "SELECT 1 FROM pg_roles WHERE rolname='$(id -un)'" \
  | grep -q 1 || psql -h 127.0.0.1 -p "$PORT" -U postgres -c "CREATE ROLE \"$(id -un)\" SUPERUSER LOGIN"
psql -h 127.0.0.1 -p "$PORT" -U postgres -tc "SELECT 1 FROM pg_database WHERE datname='test'" \
  | grep -q 1 || psql -h 127.0.0.1 -p "$PORT" -U postgres -c "CREATE DATABASE test"
