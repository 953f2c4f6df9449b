"""The early connect-back of a local Connect server's Python workers
(adapters/spark/python_worker.py) against a socket that answers as Spark's
SocketAuthHelper does: the secret with its length, "ok" or an error with its,
then the worker's pid."""

from __future__ import annotations

import os
import socket
import struct
import threading

import pytest

from adapters.spark.python_worker import connect_back


def spark_side(listener: socket.socket, secret: bytes, seen: dict) -> None:
    connection, _ = listener.accept()
    with connection, connection.makefile("rwb") as stream:
        (length,) = struct.unpack("!i", stream.read(4))
        seen["secret"] = stream.read(length)
        reply = b"ok" if seen["secret"] == secret else b"err"
        stream.write(struct.pack("!i", len(reply)) + reply)
        stream.flush()
        if reply == b"ok":
            (seen["pid"],) = struct.unpack("!i", stream.read(4))
            stream.write(b"task")
            stream.flush()


def listening() -> socket.socket:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    return listener


def test_it_sends_the_secret_and_its_pid_and_reads_the_task_on_the_same_socket():
    seen: dict = {}
    with listening() as listener:
        spark = threading.Thread(target=spark_side, args=(listener, b"s3cr\xc3\xa9t", seen))
        spark.start()
        sock_file, sock = connect_back({"PYTHON_WORKER_FACTORY_PORT": str(listener.getsockname()[1]),
                                        "PYTHON_WORKER_FACTORY_SECRET": "s3crét"})
        try:
            assert sock_file.read(4) == b"task"
            assert sock.gettimeout() == 15, "the authentication timeout stays on the socket, as in pyspark"
        finally:
            sock_file.close()
            sock.close()
        spark.join(10)
    assert seen == {"secret": "s3crét".encode(), "pid": os.getpid()}


def test_a_refused_secret_is_an_error_and_sends_no_pid():
    seen: dict = {}
    with listening() as listener:
        spark = threading.Thread(target=spark_side, args=(listener, b"right", seen))
        spark.start()
        with pytest.raises(ConnectionError, match="refused"):
            connect_back({"PYTHON_WORKER_FACTORY_PORT": str(listener.getsockname()[1]),
                          "PYTHON_WORKER_FACTORY_SECRET": "wrong", "SPARK_AUTH_SOCKET_TIMEOUT": "3"})
        spark.join(10)
    assert seen == {"secret": b"wrong"}
