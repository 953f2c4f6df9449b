# The two commands: `make up` (whole stack + demo) and `make test`.
SHELL := /bin/bash
ENV := source scripts/env.sh &&

.PHONY: up down test setup setup-tests services mutation bench

# What the stack needs (docs/development.md, "What each command installs").
setup:
	@bash scripts/setup.sh

# What only the tests (and the benchmarks) need, on top of the stack's.
setup-tests: setup
	@bash scripts/setup.sh tests

services: setup
	@bash scripts/services.sh start

up: services
	@$(ENV) $$VENV/bin/python manage.py migrate --noinput -v0
	@$(ENV) $$VENV/bin/python manage.py collectstatic --noinput -v0
	@$(ENV) $$VENV/bin/python manage.py register_cluster --name local --bootstrap-servers "$$KAFKA_BOOTSTRAP_SERVERS"
	@$(ENV) bash scripts/app.sh start
	@$(ENV) $$VENV/bin/python manage.py ensure_admin --password-file "$$GAPWATCH_HOME/admin-password"
	@$(ENV) echo "Gapwatch is up: http://127.0.0.1:$$WEB_PORT/   (logs: $$GAPWATCH_HOME/logs, stop: make down)"

down:
	@bash scripts/app.sh stop
	@bash scripts/services.sh stop

# The tests' Spark JVMs are short-lived: compiled by C1 only, they start in
# about half the time (docs/development.md).
TEST_JVM_OPTS := -XX:TieredStopAtLevel=1
# Three pytest-xdist workers (tests/xdist_schedule.py hands them whole modules,
# two JVM-heavy ones at most at once): with two, a quiet 2-core machine stayed
# a third idle, most tests waiting on brokers and clients rather than
# computing. PYTEST_WORKERS=0 runs the tests in one process. A worker that crashes (a
# native abort, a kill) fails the test it was running, once, and a new worker
# takes the rest of its unit (tests/xdist_schedule.py); up to three crashes
# in a run. With no restarts, xdist ended the whole run at the first crash.
PYTEST_WORKERS ?= 3
XDIST_OPTS = $(if $(filter 0,$(PYTEST_WORKERS)),,--max-worker-restart=3)

# Tests use Redis database 1 so a running `make up` stack never takes their
# tasks, and close database connections at once so live-server threads do not
# keep the test database open. Backfill tests start their own Spark Connect servers.
# DEBUG=1 for the settings derived from it (no HTTPS redirect, cookies over plain
# HTTP: the test client and live server speak HTTP); pytest-django still answers
# every request with DEBUG off, so the tests see Gapwatch's own error pages.
#
# PYTHONDONTWRITEBYTECODE= : the tests write bytecode even where the shell says not to
# (this machine's does). Otherwise every process of a run (pytest's workers,
# 29 Celery workers and beats, 35 backfill drivers, manage.py) compiled the
# project's modules again, and pytest rewrote every test module again: with
# the bytecode written, collecting the suite took 7 CPU s rather than 16, and
# importing Django and the tasks 2.25 rather than 2.9 (bench/RESULTS.md).
test: setup-tests services
	@$(ENV) PYTHONDONTWRITEBYTECODE= DEBUG=1 REDIS_URL=redis://127.0.0.1:$$REDIS_PORT/1 DB_CONN_MAX_AGE=0 SPARK_CONNECT_URL= BACKFILL_DRIVER=worker \
	  SPARK_SUBMIT_OPTS="$$SPARK_SUBMIT_OPTS $(TEST_JVM_OPTS)" $$VENV/bin/python -m pytest -n $(PYTEST_WORKERS) $(XDIST_OPTS) $(PYTEST_ARGS)

# The issue-11 benchmarks in one run (poll cost vs the CLI, accuracy with real
# clients, detection latency; ~10 minutes), in their own database. Results:
# bench/RESULTS.md. Not part of `make test`.
bench: setup-tests services
	@$(ENV) BENCH_SHARED_SERVICES=1 bash bench/run.sh

# Mutation testing of the pure domain, judged by tests/unit (no services; ~3 minutes
# on 2 cores). Not part of `make test`. Results: docs/MUTATION.md.
mutation:
	@bash bench/mutation.sh
