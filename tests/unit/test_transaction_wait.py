"""When a read_committed backfill may read its ranges, and what it says while
it waits (groups.domain.transaction_wait). Each case says why."""

from __future__ import annotations

import pytest

from groups.domain.planning import BackfillRange
from groups.domain.transaction_wait import HeldRange, OpenTransaction, abort_due_ms, held_ranges, hold_message

R = BackfillRange("orders", 2, 0, 40)


@pytest.mark.parametrize(("stable", "held", "why"), [
    (40, [], "the LSO at the range's end: every offset below it is decided, the range reads whole"),
    (55, [], "the LSO past the end: a transaction open above the range does not hold it"),
    (39, [HeldRange(R, 39)], "one offset short: the last record's transaction is still open"),
    (0, [HeldRange(R, 0)], "a transaction open since before the range holds all of it"),
])
def test_a_range_is_held_while_the_last_stable_offset_is_below_its_end(stable, held, why):
    assert held_ranges([R], {("orders", 2): stable}) == held, why


NOW = 1_000_000


@pytest.mark.parametrize(("transactions", "message", "why"), [
    ([], "orders[2]: the range [0, 40) ends past the last stable offset 12, where a transaction still open started",
     "nothing described (no JVM, an old broker): the partition and the offset still say what holds it"),
    ([OpenTransaction("orders", 2, 7, 12, "payments-tx", NOW - 4_000, 60_000)],
     "orders[2]: the range [0, 40) ends past the last stable offset 12, where a transaction still open started "
     "(producer id 7, transactional.id 'payments-tx', open for 4 s of its transaction.timeout.ms 60 s)",
     "the transaction that started at the LSO is the one holding it: named, with how long it is open"),
    ([OpenTransaction("orders", 2, 8, 30, "later-tx", NOW - 1_000, 60_000), OpenTransaction("orders", 2, 7, 12)],
     "orders[2]: the range [0, 40) ends past the last stable offset 12, where a transaction still open started "
     "(producer id 7)",
     "a later transaction does not hold the LSO; the one at 12 is known only by its producer"),
    ([OpenTransaction("orders", 2, 7, 12, "slow-tx", NOW - 4_000, 900_000)],
     "orders[2]: the range [0, 40) ends past the last stable offset 12, where a transaction still open started "
     "(producer id 7, transactional.id 'slow-tx', open for 4 s of its transaction.timeout.ms 900 s)",
     "the longest timeout a broker allows by default (transaction.max.timeout.ms, 15 min), in whole seconds"),
])
def test_the_wait_says_which_transaction_holds_the_range(transactions, message, why):
    assert hold_message([HeldRange(R, 12)], transactions, now_ms=NOW) == message, why


def test_the_wait_names_every_held_partition():
    other = BackfillRange("orders", 3, 5, 9)
    assert hold_message([HeldRange(R, 12), HeldRange(other, 6)], [], now_ms=NOW) == (
        "orders[2]: the range [0, 40) ends past the last stable offset 12, where a transaction still open started; "
        "orders[3]: the range [5, 9) ends past the last stable offset 6, where a transaction still open started")


@pytest.mark.parametrize(("transactions", "due", "why"), [
    ([OpenTransaction("orders", 2, 7, 12, "tx", NOW, 60_000)], NOW + 60_000,
     "the coordinator aborts a transaction at its start plus its timeout"),
    ([OpenTransaction("orders", 2, 7, 12)], None, "no start time or timeout known: no end can be promised"),
    ([OpenTransaction("orders", 2, 7, 12, "tx", NOW)], None,
     "a start time without a timeout: the abort time is still unknown"),
    ([], None, "nothing described"),
])
def test_the_abort_deadline_is_known_only_when_every_holder_is_described(transactions, due, why):
    assert abort_due_ms([HeldRange(R, 12)], transactions) == due, why
