"""What a seat costs a group's members, in words that agree with their number
(``membership.seat_cost``)."""

from __future__ import annotations

import pytest

from groups.domain.membership import seat_cost


@pytest.mark.parametrize("protocol, assignor, members, words", [
    ("consumer", "uniform", 1, "moves none of its 1 member's partitions"),
    ("consumer", "uniform", 3, "moves none of its 3 members' partitions"),
    ("classic", "cooperative-sticky", 1, "its 1 member keeps its partitions and keeps reading"),
    ("classic", "cooperative-sticky", 2, "its 2 members keep their partitions and keep reading"),
    ("classic", "range", 1, "each time its 1 member gives up its partitions and pauses until the slowest"),
    ("classic", "roundrobin", 4, "each time its 4 members give up their partitions and pause until the slowest"),
    ("classic", "", 2, "the eager assignor 'range'"),
])
def test_the_words_agree_with_the_number_of_members(protocol, assignor, members, words):
    assert words in seat_cost(protocol=protocol, assignor=assignor, members=members)
