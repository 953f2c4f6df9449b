"""The tests' harness, one package for the integration tests, the fault
tests and the benches: real processes and their ports (``processes``,
``workers``, ``clusters``), real clients and waits (``kafka_clients``:
``wait_until`` is the one wait), scenarios (``scenarios``, ``pickups``,
``backfills``), the servers of identity and security (``keycloak``,
``slapd``, ``secure_kafka``), the browser (``browser``, ``pages``), the
session's Spark Connect server (``connect``), the demo (``demo``) and a
webhook receiver (``webhooks``). Fixtures stay in the conftest files."""
