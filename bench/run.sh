#!/usr/bin/env bash
# Benchmarks against the local services, in their own database:
#   bash bench/run.sh              poll cost, accuracy with real clients, detection latency
#   bash bench/run.sh poll|scale|split|accuracy|latency|table|busy|protection [options of that script]
# BENCH_SHARED_SERVICES=1 skips setup and service start (services already run, e.g. shared by helpers).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${BENCH_SHARED_SERVICES:-}" ]; then
  bash scripts/setup.sh
  bash scripts/services.sh start
  source scripts/env.sh
fi
export DATABASE_URL=${BENCH_DATABASE_URL:-postgresql://gapwatch:gapwatch@127.0.0.1:$PG_PORT/gapwatch_bench}
bench_db=${DATABASE_URL##*/}
psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -qtAc "select 1 from pg_database where datname='$bench_db'" | grep -q 1 \
  || psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -qc "create database $bench_db owner gapwatch"
"$VENV/bin/python" manage.py migrate --noinput -v0
mode=${1:-all}
[ $# -gt 0 ] && shift
case "$mode" in
  poll) "$VENV/bin/python" bench/poll_bench.py "$@" ;;
  scale) "$VENV/bin/python" bench/scale_bench.py "$@" ;;
  split) "$VENV/bin/python" bench/split_bench.py "$@" ;;
  accuracy|latency|table) "$VENV/bin/python" bench/accuracy_bench.py "$mode" "$@" ;;
  busy) "$VENV/bin/python" bench/busy_bench.py "$@" ;;
  protection) "$VENV/bin/python" bench/protection_bench.py "$@" ;;
  all)
    "$VENV/bin/python" bench/poll_bench.py
    "$VENV/bin/python" bench/accuracy_bench.py accuracy
    "$VENV/bin/python" bench/accuracy_bench.py latency ;;
  *) echo "usage: bench/run.sh [poll|scale|split|accuracy|latency|table|busy|protection|all] [options]" >&2; exit 2 ;;
esac
