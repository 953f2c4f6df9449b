#!/usr/bin/env bash
# Runs the poll benchmark against the local services, in its own database.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/services.sh start
source scripts/env.sh
export DATABASE_URL=postgresql://gapwatch:gapwatch@127.0.0.1:$PG_PORT/gapwatch_bench
psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -qtAc "select 1 from pg_database where datname='gapwatch_bench'" | grep -q 1 \
  || psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -qc "create database gapwatch_bench owner gapwatch"
"$VENV/bin/python" manage.py migrate --noinput -v0
"$VENV/bin/python" bench/poll_bench.py "$@"
