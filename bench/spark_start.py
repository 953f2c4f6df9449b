"""How long a Spark JVM of Gapwatch's takes to start and run a first query
(a job in its own process pays this on every attempt; the Connect server
once), with and without the class-data-sharing archive that
scripts/setup.sh writes and with C1-only compilation (the tests' JVMs):

    .venv/bin/python bench/spark_start.py [runs]

Each run is a fresh process: build_session on local[2] and a count.
Prints the median and range of each configuration; results in bench/RESULTS.md.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOME = Path(os.environ.get("GAPWATCH_HOME", ROOT / ".gapwatch"))
ARCHIVE = HOME / "spark" / "classes.jsa"
ONE_RUN = (
    "from pathlib import Path; from adapters.spark.session import build_session; "
    f"spark = build_session(master='local[2]', app_name='start-bench', jars_dir=Path({str(HOME / 'lib' / 'spark')!r}), "
    "driver_memory='512m'); spark.range(1000).count(); spark.stop()"
)
CONFIGURATIONS = {
    "plain": "",
    "C1 only": "-XX:TieredStopAtLevel=1",
    "class archive": f"-XX:SharedArchiveFile={ARCHIVE}",
    "class archive + C1 (the tests)": f"-XX:SharedArchiveFile={ARCHIVE} -XX:TieredStopAtLevel=1",
}


def one_run(options: str) -> float:
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", ONE_RUN], cwd=ROOT, check=True, capture_output=True,
                   env={**os.environ, "SPARK_SUBMIT_OPTS": options})
    return time.monotonic() - started


def main(runs: int) -> None:
    if not ARCHIVE.is_file():
        sys.exit(f"no class archive at {ARCHIVE}: run scripts/setup.sh")
    print(f"| configuration | median s | min-max s ({runs} runs, interleaved) |\n|---|---|---|")
    times: dict[str, list[float]] = {name: [] for name in CONFIGURATIONS}
    for _ in range(runs):
        for name, options in CONFIGURATIONS.items():
            times[name].append(one_run(options))
    for name, seconds in times.items():
        print(f"| {name} | {statistics.median(seconds):.1f} | {min(seconds):.1f}-{max(seconds):.1f} |")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
