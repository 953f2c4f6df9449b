"""Which transactions hold partitions open, through Kafka's Java ``Admin``
(``adapters.kafka.java_client``): librdkafka has no DescribeProducers,
ListTransactions or DescribeTransactions.

1. ``describeProducers`` on the partitions: each producer with a transaction
   open there, and the offset that transaction started at;
2. ``listTransactions``: the transactional id of each of those producers;
3. ``describeTransactions``: when each transaction started and the
   producer's ``transaction.timeout.ms`` (the coordinator aborts it then).

A backfill asks this while the last stable offset of a partition is below
its range's end, to say what it waits for.
"""

from __future__ import annotations

from collections.abc import Sequence

from groups.domain.transaction_wait import OpenTransaction
from adapters.kafka.java_client import JavaClient, java_items


class TransactionReads(JavaClient):
    def open_transactions(self, partitions: Sequence[tuple[str, int]]) -> list[OpenTransaction]:
        """The transactions open now on ``partitions``, by partition and start
        offset; the transactional id, start time and timeout where the
        coordinator still describes the transaction (0 / "" otherwise)."""
        if not partitions:
            return []
        admin = self._jvm.org.apache.kafka.clients.admin
        found: list[dict] = []
        with self._calls("describe producers"):
            wanted = {(topic, partition): self._jvm.org.apache.kafka.common.TopicPartition(topic, partition)
                      for topic, partition in partitions}
            result = self._client.describeProducers(list(wanted.values()),
                                                    admin.DescribeProducersOptions().timeoutMs(self._timeout_ms))
            for (topic, partition), java_partition in wanted.items():
                state = self._get(result.partitionResult(java_partition))
                for producer in java_items(state.activeProducers()):
                    start = producer.currentTransactionStartOffset()
                    if start.isPresent():
                        found.append({"topic": topic, "partition": partition,
                                      "producer_id": int(producer.producerId()),
                                      "start_offset": int(start.getAsLong())})
        if not found:
            return []
        ids: dict[int, str] = {}
        described: dict[str, tuple[int, int]] = {}
        with self._calls("describe transactions"):
            listings = self._get(self._client.listTransactions(
                admin.ListTransactionsOptions().timeoutMs(self._timeout_ms)).all())
            producers = {item["producer_id"] for item in found}
            for listing in java_items(listings):
                if int(listing.producerId()) in producers:
                    ids[int(listing.producerId())] = str(listing.transactionalId())
            if ids:
                answers = self._get(self._client.describeTransactions(
                    sorted(set(ids.values())), admin.DescribeTransactionsOptions().timeoutMs(self._timeout_ms)).all())
                for transactional_id, description in answers.items():
                    started = description.transactionStartTimeMs()
                    described[str(transactional_id)] = (
                        int(started.getAsLong()) if started.isPresent() else 0,
                        int(description.transactionTimeoutMs()))
        transactions = []
        for item in found:
            transactional_id = ids.get(item["producer_id"], "")
            started_ms, timeout_ms = described.get(transactional_id, (0, 0))
            transactions.append(OpenTransaction(
                topic=item["topic"], partition=item["partition"], producer_id=item["producer_id"],
                start_offset=item["start_offset"], transactional_id=transactional_id,
                started_ms=started_ms, timeout_ms=timeout_ms))
        return sorted(transactions, key=lambda t: (t.topic, t.partition, t.start_offset))
