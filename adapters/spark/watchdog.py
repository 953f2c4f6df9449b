"""The watchdog of one backfill attempt on a Spark Connect server.

The server does not cancel a query whose client died: it ran a job to its
end 46 s after its client was killed. So the executor starts this process
beside every attempt, in a session of its own (a worker killed with its
process group leaves it alive), with a pipe on its stdin::

    python -m adapters.spark.watchdog --url sc://host:port --session-id ID --tag TAG

The executor writes ``done`` when the attempt ended by its own hand. If stdin
closes without it (the worker died), the watchdog interrupts the attempt's
operations by their tag, so nothing more is written or published. The token
comes from the environment (``SPARK_CONNECT_TOKEN``). pyspark is imported
only when needed: a watchdog that is never needed costs a bare interpreter.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m adapters.spark.watchdog")
    parser.add_argument("--url", required=True)
    parser.add_argument("--session-id", required=True)
    parser.add_argument("--tag", required=True)
    args = parser.parse_args(argv)
    received = b""
    while chunk := os.read(0, 1024):
        received += chunk
        if b"done" in received:
            return 0
    from adapters.spark.connect import ConnectUnavailable, interrupt

    # The server may be restarting; try for a while, then give up (its own
    # detachedTimeout interrupts the query in the end).
    deadline = time.monotonic() + 60
    while True:
        try:
            interrupted = interrupt(args.url, token=os.environ.get("SPARK_CONNECT_TOKEN", ""),
                                    session_id=args.session_id, tag=args.tag)
        except ConnectUnavailable as error:
            if time.monotonic() > deadline:
                sys.stderr.write(f"watchdog: could not interrupt {args.tag}: {error}\n")
                return 1
            time.sleep(1)
            continue
        sys.stderr.write(f"watchdog: the executor went away; interrupted {args.tag} ({len(interrupted)} operations)\n")
        return 0


if __name__ == "__main__":
    sys.exit(main())
