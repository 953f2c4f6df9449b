"""The watch's cadence with 0, 3 and 10 guarded expansions waiting at once
(issue 42), on real processes as `make up` runs them: beat, a worker for the
queue "watch" (2 threads) and one for jobs (2 threads), on the bench
database (tests/harness/busy.py). Per run: the delay of each watcher tick
and of each full poll after the one before was due again (p50, p95, max),
over the jobs' wait (EXPANSION_WATCH_SECONDS, or as long with no job).

Run with `bash bench/run.sh busy [--jobs 0 3 10] [--seconds 30]`.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import uuid
from pathlib import Path

import django

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
django.setup()

from groups.domain.job_states import SUCCEEDED, SUCCEEDED_WITH_LOSS  # noqa: E402
from groups.models import Cluster, RemediationJob  # noqa: E402
from tests.harness.busy import POLL_SECONDS, run_busy  # noqa: E402
from tests.harness.kafka_clients import Broker  # noqa: E402
from tests.harness.scenarios import poll  # noqa: E402


def backfills_ended(pulse) -> str:
    if not pulse.backfills:
        return ""
    done = RemediationJob.objects.filter(id__in=pulse.backfills, status=RemediationJob.Status.SUCCEEDED).count()
    return f"; backfills {done} of {len(pulse.backfills)} succeeded"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092"))
    parser.add_argument("--jobs", type=int, nargs="+", default=[0, 3, 10])
    parser.add_argument("--seconds", type=int, default=30, help="EXPANSION_WATCH_SECONDS: how long the jobs wait")
    parser.add_argument("--backfills", type=int, default=0,
                        help="long Parquet backfills running in drivers beside the expansions of every row")
    args = parser.parse_args()
    rows = ["| expansions waiting | backfills | ticks | tick delay p50 / p95 / max, s | ticks skipped (a poll held the lock) | "
            "full polls | poll delay p50 / p95 / max, s | jobs ended |", "|---|---|---|---|---|---|---|---|"]
    broker = Broker(args.bootstrap)
    try:
        for jobs in args.jobs:
            tag = uuid.uuid4().hex[:8]
            cluster = Cluster.objects.create(name=f"busy-{tag}", bootstrap_servers=args.bootstrap)
            try:
                with tempfile.TemporaryDirectory() as folder:
                    pulse, start = run_busy(broker, cluster, expansions=jobs, tag=tag, poll=poll,
                                            log_path=Path(folder) / "workers.log", kill_jobs_worker=False,
                                            watch_gives_up=args.seconds, backfills=args.backfills,
                                            backfill_output=Path(folder) / "backfills")
                    backfills = backfills_ended(pulse)  # before the clusters (and their jobs) go
            finally:
                Cluster.objects.filter(name__startswith="busy-").filter(name__contains=tag).delete()
            ticks = pulse.spread(pulse.delays(pulse.ticks, 1.0, start))
            polls = pulse.spread(pulse.delays(pulse.polls, POLL_SECONDS, start))
            ended = sum(status in (SUCCEEDED, SUCCEEDED_WITH_LOSS) for status, _ in pulse.jobs.values())
            rows.append(f"| {jobs} | {args.backfills} | {len(pulse.ticks)} in {pulse.span:.0f} s | {ticks} | "
                        f"{pulse.ticks_skipped} | {pulse.polls_total} | {polls} | {ended} of {jobs}"
                        f"{backfills} |")
            print(rows[-1], flush=True)
    finally:
        broker.close()
    print("\n".join(rows))


if __name__ == "__main__":
    main()
