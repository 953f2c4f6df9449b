#!/usr/bin/env bash
# Page server-time benchmark, in its own database (gapwatch_pages_bench).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/services.sh start postgres redis
source scripts/env.sh
export DATABASE_URL=postgresql://gapwatch:gapwatch@127.0.0.1:$PG_PORT/gapwatch_pages_bench DEBUG=0
export ALLOWED_HOSTS=testserver SECURE_SSL_REDIRECT=0
# One PostgreSQL backend for a whole measurement, so the bench can read its CPU time.
export DB_CONN_MAX_AGE=${DB_CONN_MAX_AGE:-3600}
psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -qtAc "select 1 from pg_database where datname='gapwatch_pages_bench'" | grep -q 1 \
  || psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -qc "create database gapwatch_pages_bench owner gapwatch"
"$VENV/bin/python" manage.py migrate --noinput -v0
"$VENV/bin/python" bench/pages_bench.py "$@"
