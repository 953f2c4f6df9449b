"""Exit 0 when the Kafka broker at argv[1] answers a metadata request."""

import sys

from confluent_kafka.admin import AdminClient

admin = AdminClient({"bootstrap.servers": sys.argv[1], "socket.timeout.ms": 2000})
try:
    metadata = admin.list_topics(timeout=3)
except Exception as error:  # noqa: BLE001 - any failure means "not ready yet"
    print(error, file=sys.stderr)
    sys.exit(1)
sys.exit(0 if metadata.brokers else 1)
