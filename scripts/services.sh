#!/usr/bin/env bash
# Start what the test suite needs when it is missing: PostgreSQL, Redis and Debian's Chromium.
# Under CI (CI=true) each is required; elsewhere a missing one is reported and its tests are skipped.
set -uo pipefail
required=${CI:-false}
fail() { if [ "$required" = "true" ]; then echo "services: $1" >&2; exit 1; else echo "services: $1 (its tests will be skipped)"; fi; }
up_pg() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
up_redis() { (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null; }
as_root() { [ "$(id -u)" = 0 ]; }

if ! up_pg; then
  if ! command -v pg_ctlcluster >/dev/null && as_root; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  fi
  if command -v pg_ctlcluster >/dev/null; then
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start 2>/dev/null || true
    for _ in $(seq 20); do up_pg && break; sleep 0.5; done
  fi
  up_pg || fail "PostgreSQL is not reachable on 127.0.0.1:5432"
fi

if ! up_redis; then
  if ! command -v redis-server >/dev/null && as_root; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
  fi
  if command -v redis-server >/dev/null; then
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no >/dev/null
    for _ in $(seq 20); do up_redis && break; sleep 0.25; done
  fi
  up_redis || fail "Redis is not reachable on 127.0.0.1:6379"
fi

if [ ! -x /usr/bin/chromium ]; then
  if as_root && command -v apt-get >/dev/null; then
    echo "services: installing Debian's chromium for the browser tests"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  fi
  [ -x /usr/bin/chromium ] || fail "Debian's chromium is not installed at /usr/bin/chromium"
fi
exit 0
