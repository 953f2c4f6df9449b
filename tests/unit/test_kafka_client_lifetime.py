"""A KafkaClient dropped by its caller frees its librdkafka client at once
(reference counting), never later from the cyclic collector: librdkafka
aborts the process when a client is destroyed on one of its own threads,
which is where a collection can run (an error callback during a broker
restart). Seen as "Fatal Python error: Aborted" in the fault tests."""

from __future__ import annotations

import gc
import weakref

from groups.domain.cluster_config import ClusterConfig
from adapters.kafka.client import KafkaClient


def test_a_dropped_client_is_freed_without_the_cyclic_collector():
    gc.disable()
    try:
        client = KafkaClient(ClusterConfig("127.0.0.1:9"), timeout=1.0)
        assert client.admin is not None  # the librdkafka client with its error callback
        gone = weakref.ref(client)
        del client
        assert gone() is None, "a reference cycle keeps the client (and its librdkafka threads) alive"
    finally:
        gc.enable()
