#!/usr/bin/env bash
# Make sure a Redis server answers on 127.0.0.1:6379 for the bench's Celery peer.
# 1. already running: nothing to do;  2. otherwise: start the installed redis-server, keeping
# nothing on disk (the command this machine kind starts it with).
set -euo pipefail
PORT=6379
ready() { redis-cli -h 127.0.0.1 -p "$PORT" ping 2>/dev/null | grep -q PONG; }
wait_ready() { for _ in $(seq 1 60); do ready && return 0; sleep 0.5; done; return 1; }

if ready; then exit 0; fi

if ! command -v redis-server >/dev/null; then
  echo "no redis-server found (install Debian's redis-server package)" >&2
  exit 1
fi
echo "Redis is down; starting redis-server on 127.0.0.1:$PORT" >&2
mkdir -p /var/lib/redis /var/log/redis
redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$PORT" --save "" --appendonly no \
  --dir /var/lib/redis --logfile /var/log/redis/ci.log
wait_ready
