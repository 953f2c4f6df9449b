"""The one vocabulary of a job's status and its table of moves
(groups.domain.job_states), for both kinds of job. Each case says why its
answer is right."""

from __future__ import annotations

import pytest

from groups.domain.job_states import (
    APPROVED,
    CANCELLED,
    EXPANSION,
    FAILED,
    FINISHED,
    MOVES,
    QUEUED,
    REFUSED,
    REMEDIATION,
    REQUESTED,
    RUNNING,
    STATUS_WORDS,
    STATUSES,
    SUCCEEDED,
    SUCCEEDED_WITH_LOSS,
    UNDONE,
    WAITING,
    active,
    audit_action,
    cancellable,
    finished,
    kind_statuses,
    move_allowed,
    move_stamps,
)

ALLOWED = [
    (REMEDIATION, REQUESTED, APPROVED, "a second approver approves a four-eyes request"),
    (REMEDIATION, REQUESTED, CANCELLED, "a request nobody approved yet may be cancelled"),
    (REMEDIATION, APPROVED, QUEUED, "a worker takes an approved job"),
    (REMEDIATION, APPROVED, CANCELLED, "an approved job not taken yet may be cancelled"),
    (REMEDIATION, QUEUED, RUNNING, "a reset's group is Empty, or a backfill got a Spark slot"),
    (REMEDIATION, QUEUED, WAITING, "a reset's group still has members"),
    (REMEDIATION, QUEUED, FAILED, "the cluster refuses the reset before it starts (a missing ACL)"),
    (REMEDIATION, QUEUED, CANCELLED, "a queued job has not touched Kafka yet"),
    (REMEDIATION, WAITING, RUNNING, "the group emptied after a poll"),
    (REMEDIATION, WAITING, FAILED, "the wait's deadline passed"),
    (REMEDIATION, WAITING, CANCELLED, "a waiting reset has not touched Kafka yet"),
    (REMEDIATION, RUNNING, RUNNING, "a job whose worker died is restarted"),
    (REMEDIATION, RUNNING, WAITING, "the group became active before the commit"),
    (REMEDIATION, RUNNING, SUCCEEDED, "read back equal to the plan, or the backfill verified"),
    (REMEDIATION, RUNNING, FAILED, "the reset or the backfill failed"),
    (EXPANSION, REQUESTED, APPROVED, "an expansion is always approved by a second person"),
    (EXPANSION, REQUESTED, REFUSED, "the approver refuses it, or its requester withdraws it"),
    (EXPANSION, APPROVED, RUNNING, "its first run starts it"),
    (EXPANSION, RUNNING, SUCCEEDED, "every group lost nothing"),
    (EXPANSION, RUNNING, SUCCEEDED_WITH_LOSS, "every step ran, and a group's verdict names offsets lost"),
    (EXPANSION, RUNNING, FAILED, "a step can never succeed, or the broker stayed away"),
]

REFUSED_MOVES = [
    (REMEDIATION, REQUESTED, QUEUED, "a request must be approved before a worker takes it"),
    (REMEDIATION, REQUESTED, RUNNING, "nothing runs unapproved"),
    (REMEDIATION, APPROVED, RUNNING, "a worker queues the job first: the queue move is what it takes"),
    (REMEDIATION, RUNNING, CANCELLED, "a running job has touched Kafka: it ends by itself"),
    (REMEDIATION, RUNNING, SUCCEEDED_WITH_LOSS, "a remediation's loss is said on its findings, not its status"),
    (REMEDIATION, WAITING, WAITING, "a waiting job only refreshes its reason: no second audit row"),
    (REMEDIATION, WAITING, SUCCEEDED, "nothing was committed while waiting"),
    (REMEDIATION, REQUESTED, REFUSED, "a remediation's request is cancelled, not refused"),
    (REMEDIATION, SUCCEEDED, RUNNING, "an end is final: a new job is a retry"),
    (REMEDIATION, FAILED, QUEUED, "a failed job is retried as a new job"),
    (REMEDIATION, CANCELLED, APPROVED, "a cancelled request cannot be approved"),
    (EXPANSION, REQUESTED, CANCELLED, "an expansion is refused, not cancelled"),
    (EXPANSION, REQUESTED, RUNNING, "nothing is added to a topic unapproved"),
    (EXPANSION, APPROVED, QUEUED, "an expansion is a row advanced in runs: it has no queue step"),
    (EXPANSION, APPROVED, REFUSED, "once approved, it can no longer be refused"),
    (EXPANSION, RUNNING, WAITING, "a run that must wait keeps the job running, its reason said"),
    (EXPANSION, RUNNING, RUNNING, "a resumed run continues; it does not restart the job"),
    (EXPANSION, RUNNING, CANCELLED, "partitions cannot be taken back"),
    (EXPANSION, SUCCEEDED_WITH_LOSS, SUCCEEDED, "a verdict is final"),
    (EXPANSION, REFUSED, APPROVED, "a refused plan is requested again, as a new job"),
    (EXPANSION, "planned", APPROVED, "the old word is not in the vocabulary"),
    (REMEDIATION, QUEUED, "done", "nor is the old end"),
]


@pytest.mark.parametrize(("kind", "from_status", "to_status", "why"), ALLOWED)
def test_the_table_allows(kind, from_status, to_status, why):
    assert move_allowed(kind, from_status, to_status), why


@pytest.mark.parametrize(("kind", "from_status", "to_status", "why"), REFUSED_MOVES)
def test_the_table_refuses(kind, from_status, to_status, why):
    assert not move_allowed(kind, from_status, to_status), why


def test_every_move_of_the_table_is_a_case_above():
    listed = {(kind, a, b) for kind, a, b, _ in ALLOWED}
    table = {(kind, a, b) for kind, moves in MOVES.items() for a, targets in moves.items() for b in targets}
    assert table == listed, "a move added to the table needs its reason here"


@pytest.mark.parametrize(("kind", "statuses", "why"), [
    (REMEDIATION, (REQUESTED, APPROVED, QUEUED, WAITING, RUNNING, SUCCEEDED, FAILED, CANCELLED),
     "a remediation is queued and may wait, is cancelled, never refused and has no loss of its own"),
    (EXPANSION, (REQUESTED, APPROVED, RUNNING, SUCCEEDED, SUCCEEDED_WITH_LOSS, FAILED, REFUSED),
     "an expansion is never queued nor cancelled, and may end with a loss"),
])
def test_each_kind_has_its_statuses_in_the_vocabularys_order(kind, statuses, why):
    assert kind_statuses(kind) == statuses, why


@pytest.mark.parametrize(("kind", "expected", "why"), [
    (REMEDIATION, (REQUESTED, APPROVED, QUEUED, WAITING, RUNNING), "each holds its findings"),
    (EXPANSION, (REQUESTED, APPROVED, RUNNING), "each holds its topic: one expansion at a time"),
])
def test_the_active_statuses_are_those_a_move_leaves(kind, expected, why):
    assert active(kind) == expected, why


@pytest.mark.parametrize(("kind", "expected", "why"), [
    (REMEDIATION, (SUCCEEDED, FAILED, CANCELLED), "no move leaves them"),
    (EXPANSION, (SUCCEEDED, SUCCEEDED_WITH_LOSS, FAILED, REFUSED), "no move leaves them"),
])
def test_the_finished_statuses_are_the_ends(kind, expected, why):
    assert finished(kind) == expected, why
    assert set(finished(kind)) <= set(FINISHED), "each kind's ends are the vocabulary's, which stamp finished_at"


@pytest.mark.parametrize(("kind", "expected", "why"), [
    (REMEDIATION, (REQUESTED, APPROVED, QUEUED, WAITING), "not yet running: nothing touched Kafka"),
    (EXPANSION, (), "an expansion is refused before approval and never cancelled"),
])
def test_the_cancellable_statuses(kind, expected, why):
    assert cancellable(kind) == expected, why


@pytest.mark.parametrize(("to_status", "stamps", "why"), [
    (RUNNING, ("started_at",), "it starts (again, after a restart)"),
    (SUCCEEDED, ("finished_at",), "an end"),
    (SUCCEEDED_WITH_LOSS, ("finished_at",), "an end"),
    (FAILED, ("finished_at",), "an end"),
    (CANCELLED, ("finished_at",), "an end"),
    (REFUSED, ("finished_at",), "an end"),
    (APPROVED, (), "approval records approved_at itself"),
    (QUEUED, (), "neither a start nor an end"),
    (WAITING, (), "it has not started running"),
])
def test_a_move_stamps_its_moment(to_status, stamps, why):
    assert move_stamps(to_status) == stamps, why


@pytest.mark.parametrize(("kind", "to_status", "action", "why"), [
    (REMEDIATION, APPROVED, "job.approved", "remediations were audited as job.<status> and still are"),
    (EXPANSION, SUCCEEDED_WITH_LOSS, "expansion.succeeded_with_loss", "an expansion's rows name the expansion"),
])
def test_a_move_is_audited_by_kind_and_status(kind, to_status, action, why):
    assert audit_action(kind, to_status) == action, why


def test_every_status_has_words_and_the_loss_reads_as_done():
    assert set(STATUS_WORDS) == set(STATUSES)
    assert STATUS_WORDS[SUCCEEDED_WITH_LOSS] == "done with loss", "succeeded beside a loss would contradict itself"
    assert all(STATUS_WORDS[s] == s for s in STATUSES if s != SUCCEEDED_WITH_LOSS), "the others are their name"


@pytest.mark.parametrize(("status", "undone", "why"), [
    (FAILED, True, "it stopped: its findings stay open"),
    (CANCELLED, True, "cancelled before it ran"),
    (REFUSED, True, "an expansion refused: its topic is as it was"),
    (SUCCEEDED, False, "done"),
    (SUCCEEDED_WITH_LOSS, False, "carried out, its verdicts name the loss"),
    (REQUESTED, False, "not ended"),
    (RUNNING, False, "not ended"),
    ("led", False, "not a status (a substring of 'cancelled' once matched)"),
])
def test_undone_statuses_are_the_ends_that_did_not_do_the_plan(status, undone, why):
    from groups.templatetags.gapwatch import status_undone

    assert status_undone(status) is undone, why
    assert set(UNDONE) <= set(FINISHED)
