# Waymark: `make run` starts it with demo data on the embedded default; `make test` runs every check.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PORT ?= 8000

LOCK := requirements/dev.lock
BENCH_LOCK := requirements/bench.lock
PIP := $(PY) -m pip --disable-pip-version-check
# pip-compile runs from its own virtualenv so that regenerating the lock never changes the project's.
LOCK_VENV := var/lock-venv
PIP_COMPILE := $(LOCK_VENV)/bin/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras \
	--no-emit-find-links --no-emit-index-url --no-emit-trusted-host

.PHONY: run test lint format bench lock services clean help

help:
	@echo "make run    start Waymark with demo data (embedded: SQLite + filesystem broker)"
	@echo "make test   ruff, import-linter and the whole pytest suite (two xdist workers; PYTEST_WORKERS=0: serially)"
	@echo "make lint   ruff and import-linter only"
	@echo "make bench  the benchmarks in bench/, figures as ratios"
	@echo "make lock   regenerate requirements/*.lock from the pyprojects (pip-compile)"

$(PY):
	@bash scripts/make-venv.sh $(VENV)

# The exact versions the suite passed with, from the lock (hash-checked); the two packages themselves without deps.
$(STAMP): $(LOCK) pyproject.toml clients/python/pyproject.toml | $(PY)
	$(PIP) install --quiet -r $(LOCK)
	$(PIP) install --quiet --no-deps -e . -e ./clients/python
	@touch $(STAMP)

# Runtime + dev, then the same plus the bench extra constrained to it. Existing pins are kept where the pyprojects
# still allow them; `make lock UPGRADE=1` moves every pin to the newest release the bounds allow.
lock:
	@test -x $(LOCK_VENV)/bin/pip-compile || { bash scripts/make-venv.sh $(LOCK_VENV) && $(LOCK_VENV)/bin/pip install --quiet pip-tools; }
	$(PIP_COMPILE) $(if $(UPGRADE),--upgrade) --extra dev -o $(LOCK) pyproject.toml clients/python/pyproject.toml
	$(PIP_COMPILE) $(if $(UPGRADE),--upgrade) --extra dev --extra bench -c $(LOCK) -o $(BENCH_LOCK) \
		pyproject.toml clients/python/pyproject.toml

run: $(STAMP)
	@bash scripts/run.sh $(PORT)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

services:
	@bash scripts/services.sh

# The suite on PYTEST_WORKERS xdist workers (each its own test database; what workers share, one group on one worker:
# tests/conftest.py). Serially: `make test PYTEST_WORKERS=0`, or PYTEST_ARGS="-n 0" or "-p no:xdist".
PYTEST_WORKERS ?= 2
XDIST = $(if $(findstring no:xdist,$(PYTEST_ARGS)),,-n $(PYTEST_WORKERS))

test: $(STAMP) services lint
	$(PY) manage.py makemigrations --check --dry-run --settings=config.settings.test > /dev/null
	$(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

bench: $(STAMP) services
	$(PIP) install --quiet -r $(BENCH_LOCK)
	@for b in bench/[!_]*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) $(LOCK_VENV) var/*.sqlite3* var/broker var/cache
