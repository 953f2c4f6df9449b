"""Gapwatch's adapters to the systems it talks to: Kafka (``adapters.kafka``:
librdkafka and Kafka's Java Admin client) and Spark (``adapters.spark``: the
backfill job and its sessions). They take explicit arguments and import only
the pure domain (``groups.domain``), never Django, the ORM or Celery; the
Celery tasks and processes in ``tasks`` call them."""
