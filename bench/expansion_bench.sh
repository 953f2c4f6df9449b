#!/usr/bin/env bash
# Issue 33's bench row: N guarded expansions (default 10), each the proof of
# tests/integration/test_expansion_job.py (ten kinds of group, a Kafka Streams
# application among them, on a broker of its own, producers at 20 records/s a
# partition, 2 -> 4 partitions, requested and approved in Chromium), and per
# kind of group the plan's estimate against what it measurably never read
# itself, with the time from approval to the verdict.
#   bash bench/expansion_bench.sh [N]     (services up: bash scripts/services.sh start)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}
out=$(mktemp /tmp/expansion-bench-XXXXXX.jsonl)
test=tests/integration/test_expansion_job.py::test_an_approved_expansion_ends_with_nothing_lost_for_every_kind_of_group
for run in $(seq "$runs"); do
  log=$(mktemp /tmp/expansion-bench-run-XXXXXX.log)
  if EXPANSION_BENCH_OUT=$out make -s test PYTEST_WORKERS=0 PYTEST_ARGS="$test -q -p no:cacheprovider" >"$log" 2>&1; then
    rm -f "$log"
  else
    echo "run $run failed (not in the table): $log" >&2
  fi
done
source scripts/env.sh
"$VENV/bin/python" - "$out" <<'PY'
import json, statistics, sys

rows = [json.loads(line) for line in open(sys.argv[1])]
print(f"{len(rows)} expansions; approval to verdict: median {statistics.median(r['approval_to_verdict_s'] for r in rows):.1f} s, "
      f"min {min(r['approval_to_verdict_s'] for r in rows):.1f} s, max {max(r['approval_to_verdict_s'] for r in rows):.1f} s; "
      f"produce rate seen by the plan {statistics.median(r['rate'] or 0 for r in rows):.0f} offsets/s (median)")
print()
print("| group | outcome | expected (estimate, offsets) | measured: never read itself (min-median-max) | replayed by its backfill (median) | nothing lost |")
print("|---|---|---|---|---|---|")
for kind in rows[0]["groups"]:
    cells = [r["groups"][kind] for r in rows]
    low = statistics.median(c["expected"][0] for c in cells if c["expected"][0] is not None) if any(
        c["expected"][0] is not None for c in cells) else None
    high = statistics.median(c["expected"][1] for c in cells if c["expected"][1] is not None) if any(
        c["expected"][1] is not None for c in cells) else None
    measured = sorted(c["measured"] for c in cells)
    expected = "—" if low is None else f"{low:.0f}–{high:.0f}"
    print(f"| {kind} | {cells[0]['outcome']} | {expected} | {measured[0]}–{statistics.median(measured):.0f}–{measured[-1]} | "
          f"{statistics.median(c['replayed'] for c in cells):.0f} | {sum(c['nothing_lost'] for c in cells)}/{len(cells)} |")
PY
