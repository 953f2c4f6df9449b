"""The tests' harness, one package for the integration tests, the fault
tests and the benches: real processes and their ports (``processes``,
``workers``, ``clusters``), real clients and waits (``kafka_clients``:
``wait_until`` is the one wait), scenarios (``scenarios``, ``pickups``,
``backfills``), the servers of identity and security (``keycloak``,
``slapd``, ``secure_kafka``), the browser (``browser``, ``pages``), the
session's Spark Connect server (``connect``), the demo (``demo``) and a
webhook receiver (``webhooks``). Fixtures stay in the conftest files."""

import os

# The harness starts servers with a ``preexec_fn`` (``processes._die_with_parent``),
# so Python forks them with fork(), not vfork(), and gRPC's fork handlers
# (on by default) restart its poller thread in the child, where close_fds has
# closed the poller's epoll descriptor: the child dies before exec, its log
# holding "Epoll1Poller encountered epoll_wait error: Bad file descriptor"
# (a Spark Connect server "exited" on start in CI, in a worker that had
# talked to another server; 11 of 300 such children in a loop). Nothing here
# forks to run gRPC in the child, so the handlers are off, before pyspark's
# client imports grpc.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
