"""How fast this machine's CPU is while a command runs: the CPU time of a
fixed piece of Python work, taken every few seconds beside the command.

    .venv/bin/python bench/host_speed.py [--every SECONDS] -- COMMAND [ARGS...]

The machine is a virtual one. Runs of the same code have differed by minutes
(bench/RESULTS.md, "The test suite"), and the same 160 tests charged 345 to
391 CPU seconds in three runs and 126 in two runs half an hour later. A probe
beside a run says whether the machine itself was slower: the probe's own CPU
time barely moves with the load inside this machine (55 to 56 ms at the median
through a whole test suite, 54 ms idle), so a higher figure means a slower
CPU. This prints the command's wall time with the probe's median, least and
most milliseconds. The probe costs about 0.5% of one core at the default 10 s.
Exits with the command's exit status.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time

LOOPS = 1_000_000


def probe_ms() -> float:
    """CPU milliseconds of LOOPS rounds of integer arithmetic in this thread."""
    started = time.thread_time()
    total = 0
    for number in range(LOOPS):
        total += number * number % 7
    return (time.thread_time() - started) * 1000


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", type=float, default=10.0, help="seconds between probes (default 10)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    if args.every <= 0:
        parser.error("--every must be more than 0 seconds")

    taken: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(args.every):
            taken.append(probe_ms())

    sampler = threading.Thread(target=sample, daemon=True)
    started = time.monotonic()
    sampler.start()
    try:
        status = subprocess.call(command)
    except FileNotFoundError as error:
        parser.error(f"cannot run {command[0]}: {error.strerror}")
    finally:
        done.set()
    wall = time.monotonic() - started
    sampler.join()
    if taken:
        speed = (f"probe median {statistics.median(taken):.0f} ms, least {min(taken):.0f}, "
                 f"most {max(taken):.0f} ({len(taken)} probes)")
    else:
        speed = "no probe (the command ended before the first)"
    print(f"host_speed: {wall:.0f} s of wall time, exit {status}; {speed}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
