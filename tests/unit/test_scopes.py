"""Team scopes, the pure rule (groups.domain.scopes): which grant covers
what, and patterns read alike by Python and PostgreSQL."""

from __future__ import annotations

import re

import pytest

from groups.domain.scopes import ANY, APPROVER, VIEWER, Grant, covering, glob_to_regex, matches, \
    may_manage_clusters, sees_everything

PAYMENTS = Grant(APPROVER, clusters=("prod-eu",), groups="payments-*", topics=ANY, source="payments")
READ_ORDERS = Grant(VIEWER, clusters=("prod-*", "stage"), groups=ANY, topics="orders.?", source="orders")


@pytest.mark.parametrize("role, cluster, group, topic, expected", [
    (APPROVER, "prod-eu", "payments-api", "anything", PAYMENTS),
    (VIEWER, "prod-eu", "payments-api", "anything", PAYMENTS),  # an approver reads too
    (APPROVER, "prod-us", "payments-api", "anything", None),  # another cluster
    (APPROVER, "prod-eu", "old-payments-api", "anything", None),  # the whole name must match
    (APPROVER, "prod-eu", "Payments-api", "anything", None),  # case matters
    (APPROVER, "prod-eu", "orders-api", "orders.1", None),  # a viewer grant never lets one act
    (VIEWER, "prod-eu", "orders-api", "orders.1", READ_ORDERS),
    (VIEWER, "prod-us", "orders-api", "orders.1", READ_ORDERS),  # a cluster pattern
    (VIEWER, "stage", "orders-api", "orders.1", READ_ORDERS),
    (VIEWER, "stage-2", "orders-api", "orders.1", None),
    (VIEWER, "stage", "orders-api", "orders.12", None),  # ? is one character
    (VIEWER, "stage", "orders-api", "ordersX1", None),  # . is literal
    (VIEWER, "dev", "x", "y", None),
    (VIEWER, "prod-eu", "payments-api", None, PAYMENTS),  # a group's page: no topic checked
    (VIEWER, "stage", None, "orders.1", READ_ORDERS),  # a topic's page: no group checked
    (VIEWER, "stage", None, None, READ_ORDERS),  # a cluster
])
def test_the_first_grant_that_covers_it(role, cluster, group, topic, expected):
    assert covering([PAYMENTS, READ_ORDERS], role, cluster=cluster, group=group, topic=topic) == expected


def test_no_grant_covers_nothing():
    assert covering([], VIEWER, cluster="prod-eu", group="g", topic="t") is None


@pytest.mark.parametrize("grants, manages, everything", [
    ([Grant(APPROVER)], True, True),
    ([Grant(VIEWER)], False, True),
    ([Grant(APPROVER, clusters=("prod-eu",))], False, False),
    ([Grant(APPROVER, groups="a*")], False, False),
    ([Grant(APPROVER, topics="a*")], False, False),
    ([PAYMENTS, Grant(VIEWER)], False, True),
    ([], False, False),
])
def test_only_an_unlimited_approver_manages_clusters(grants, manages, everything):
    assert may_manage_clusters(grants) is manages
    assert sees_everything(grants) is everything


@pytest.mark.parametrize("pattern, regex", [
    ("payments-*", r"^payments\-.*$"),
    ("a?c", "^a.c$"),
    ("orders.v1", r"^orders\.v1$"),
    ("*", "^.*$"),
    ("[x]", r"^\[x\]$"),
    ("", "^$"),
])
def test_a_pattern_is_an_anchored_regular_expression(pattern, regex):
    assert glob_to_regex(pattern) == regex


@pytest.mark.parametrize("pattern, name, expected", [
    ("payments-*", "payments-", True),
    ("payments-*", "payments", False),
    ("*-eu", "prod-eu", True),
    ("*-eu", "prod-eu-2", False),
    ("a*b", "a\nb", True),  # any character, a newline too (as PostgreSQL's ~)
    ("[ab]", "a", False),  # no classes: brackets are literal
    ("[ab]", "[ab]", True),
    ("(x|y)", "x", False),
])
def test_matching(pattern, name, expected):
    assert matches(pattern, name) is expected
    assert (re.fullmatch(glob_to_regex(pattern), name, flags=re.DOTALL) is not None) is expected


def test_a_grant_says_what_it_allows():
    assert PAYMENTS.describe() == "approver on prod-eu, groups payments-*, topics *"
    assert Grant(VIEWER).describe() == "viewer on every cluster, groups *, topics *"
    assert READ_ORDERS.describe() == "viewer on prod-*, stage, groups *, topics orders.?"
    assert Grant(VIEWER).unlimited and not PAYMENTS.unlimited
