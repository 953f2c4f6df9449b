#!/usr/bin/env bash
# Mutation testing of the pure domain (groups/domain/), judged by tests/unit
# alone: no service is needed. `make mutation` runs this; it is not part of
# `make test`. Configuration: [tool.mutmut] in pyproject.toml. Results and the
# reasons each surviving mutant is equivalent: docs/MUTATION.md.
#
# 1. A fresh mutmut run over every mutant (mutants/ is rebuilt each time).
# 2. The count per outcome, and every survivor by name (`mutmut show NAME`
#    prints its diff).
# 3. The three bugs issue 15 names, applied one at a time to a copy of the
#    tree: each must make tests/unit/test_core.py fail.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
# Sets of strings iterate in hash order: a fixed seed makes the run repeatable.
export PYTHONHASHSEED=0
# mutmut puts mutants/ first on sys.path; the checkout itself must not shadow it.
unset PYTHONPATH

rm -rf mutants
"$VENV/bin/mutmut" run --max-children "${MUTATION_CHILDREN:-2}" > /dev/null 2>&1 || true
results=$("$VENV/bin/mutmut" results --all true)
echo "== mutants of groups/domain/ by outcome"
echo "$results" | awk -F': ' 'NF == 2 {count[$2]++; total++} END {for (s in count) printf "%-10s %d\n", s, count[s]; printf "%-10s %d\n", "total", total}' | sort
echo "== not killed"
echo "$results" | awk -F': ' 'NF == 2 && $2 != "killed" {print "  " $1 ": " $2}'

echo "== the bugs of issue 15 (each must be killed)"
failed=0
bug() {
    local name=$1 file=$2 old=$3 new=$4 tmp
    tmp=$(mktemp -d)
    cp -r groups tests controlplane tasks demo pyproject.toml "$tmp"/
    "$VENV/bin/python" - "$tmp/$file" "$old" "$new" <<'PY'
import sys
path, old, new = sys.argv[1:]
text = open(path).read()
assert text.count(old) == 1, f"{old!r} is not in {path} exactly once: update bench/mutation.sh"
open(path, "w").write(text.replace(old, new))
PY
    if (cd "$tmp" && PYTHONPATH="$tmp" "$VENV/bin/python" -m pytest -p no:cacheprovider -q -x \
            tests/unit/test_core.py > /dev/null 2>&1); then
        echo "  SURVIVED: $name"; failed=1
    else
        echo "  killed:   $name"
    fi
    rm -rf "$tmp"
}
bug "missed_definite without '- start'" groups/domain/detection.py \
    "missed_definite = max(0, definite_end - start)" "missed_definite = max(0, definite_end)"
bug "backfill range ignores first_log_start" groups/domain/detection.py \
    "start = max(log_start, first_log_start)" "start = log_start"
bug "expired count ignores first_log_start" groups/domain/detection.py \
    "return max(0, min(log_start, missed_end) - first_log_start)" "return max(0, min(log_start, missed_end))"
exit $failed
