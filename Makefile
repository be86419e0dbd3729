# Waymark: `make run` starts it with demo data on the embedded default; `make test` runs every check.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PORT ?= 8000

.PHONY: run test lint format bench services clean help

help:
	@echo "make run    start Waymark with demo data (embedded: SQLite + filesystem broker)"
	@echo "make test   ruff, import-linter and the whole pytest suite"
	@echo "make lint   ruff and import-linter only"
	@echo "make bench  the benchmarks in bench/, figures as ratios"

$(PY):
	@bash scripts/make-venv.sh $(VENV)

$(STAMP): pyproject.toml clients/python/pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	$(PY) -m pip install --quiet --disable-pip-version-check -e ./clients/python
	@touch $(STAMP)

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

test: $(STAMP) services lint
	$(PY) manage.py makemigrations --check --dry-run --settings=config.settings.test > /dev/null
	$(PY) -m pytest $(PYTEST_ARGS)

bench: $(STAMP) services
	@for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) var/*.sqlite3* var/broker var/cache
