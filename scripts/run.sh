#!/usr/bin/env bash
# `make run`: the embedded default. Migrate, seed the demo (idempotent), then web + one real Celery worker.
set -euo pipefail
port=${1:-8000}
export DJANGO_SETTINGS_MODULE=${DJANGO_SETTINGS_MODULE:-config.settings.local}
export PORT=$port
export WAYMARK_URL=${WAYMARK_URL:-http://127.0.0.1:$port}
# Beside an earlier `make run` (or what one left running) stop here, before migrating and seeding: say who holds the
# port and how to stop it (scripts/check_port.py).
.venv/bin/python scripts/check_port.py "$port" || exit 1
# Where the embedded default keeps its files, the beat schedule among them (the Procfile's `--schedule`).
mkdir -p "${WAYMARK_VAR_DIR:-var}"
.venv/bin/python manage.py migrate --no-input -v 0
.venv/bin/python manage.py seed_demo || echo "  the demo could not be seeded (see above); starting anyway" >&2
cat <<MSG

  Waymark is starting at http://127.0.0.1:${port}/
  Demo logins (password "waymark-demo"):
    admin     — admin
    rita, rob — reviewers
    otto      — operator
    vera      — read-only (no role)
  Agent token "demo-agent" (scopes for ingest, graphs, procedures, evaluations) is saved in:
    $(token_file="${WAYMARK_VAR_DIR:-var}/demo-agent-token"; [ -s "$token_file" ] && echo "$token_file  (read it with: cat $token_file)" || echo "nowhere yet; create one: manage.py create_api_token")
  Stop with Ctrl-C. Django's debug pages are off; WAYMARK_DEBUG=1 make run turns them on for development.

MSG
# Every supervised process stops its command when this process (honcho, after the exec) is gone: scripts/supervise.py.
export WAYMARK_STACK_PID=$$
exec .venv/bin/honcho -f Procfile start
