"""The Python worker a local-master Spark Connect server starts for each task
of a handler job (``spark.python.worker.module``, adapters/spark/connect.py):
Spark's own ``pyspark.worker``, but connected back first.

Spark gives a worker it starts without a daemon a fixed 10 s to connect back
(PythonWorkerFactory.createSimpleWorker), and ``pyspark.worker`` connects only
after importing itself: about 0.4 CPU s. On a host whose cores the JVMs
crowd, that missed the 10 s on every one of a task's tries and the handler
job failed ("Python worker failed to connect back"). This module connects,
authenticates and sends its pid as pyspark does (``get_sock_file_to_executor``)
with the standard library only, then imports pyspark and runs its worker's
``main`` on that socket.

A cluster's executors do not get this module (it is not installed there).
"""

from __future__ import annotations

import os
import runpy
import socket
import struct
from typing import BinaryIO


def connect_back(environ: dict[str, str]) -> tuple[BinaryIO, socket.socket]:
    """Connect to the JVM at ``PYTHON_WORKER_FACTORY_PORT`` and authenticate
    with ``PYTHON_WORKER_FACTORY_SECRET`` (pyspark.util.local_connect_and_auth:
    the secret with its length, the reply "ok" with its), then send this
    process's pid (get_sock_file_to_executor). The socket keeps the
    authentication timeout, as pyspark's does."""
    address = "::1" if environ.get("SPARK_PREFER_IPV6", "false").lower() == "true" else "127.0.0.1"
    timeout = int(environ.get("SPARK_AUTH_SOCKET_TIMEOUT", 15))
    sock = socket.create_connection((address, int(environ["PYTHON_WORKER_FACTORY_PORT"])), timeout=timeout)
    sock_file = sock.makefile("rwb", int(environ.get("SPARK_BUFFER_SIZE", 65536)))
    secret = environ["PYTHON_WORKER_FACTORY_SECRET"].encode("utf-8")
    sock_file.write(struct.pack("!i", len(secret)) + secret)
    sock_file.flush()
    (length,) = struct.unpack("!i", sock_file.read(4))
    if sock_file.read(length) != b"ok":
        sock_file.close()
        sock.close()
        raise ConnectionError("Spark refused this Python worker's secret")
    sock_file.write(struct.pack("!i", os.getpid()))
    sock_file.flush()
    return sock_file, sock


def run() -> None:
    if "PYTHON_WORKER_FACTORY_PORT" not in os.environ or "PYTHON_WORKER_FACTORY_SOCK_PATH" in os.environ:
        # A Unix-domain socket (spark.python.unix.domain.socket.enabled), or not started by Spark: pyspark's way.
        runpy.run_module("pyspark.worker", run_name="__main__", alter_sys=True)
        return
    sock_file, sock = connect_back(dict(os.environ))
    try:
        from pyspark.worker import main

        main(sock_file, sock_file)
    finally:
        sock_file.close()
        sock.close()


if __name__ == "__main__":
    run()
