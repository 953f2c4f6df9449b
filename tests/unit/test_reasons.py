"""The words a job or a finding keeps of why (groups.domain.reasons): a
person's reason, checked, and a system's text, cut to one size. Each case
says why its answer is right."""

from __future__ import annotations

import pytest

from groups.domain.reasons import REASON_LIMIT, TEXT_LIMIT, ReasonRefused, person_reason, system_text


@pytest.mark.parametrize(("text", "required", "expected", "why"), [
    ("  flaky test topic \n", True, "flaky test topic", "white space around a reason is not part of it"),
    ("a  b", True, "a  b", "white space inside is the person's"),
    ("", False, "", "an optional reason may be empty"),
    ("   ", False, "", "white space alone is empty, allowed when optional"),
    (None, False, "", "a missing optional reason is empty"),
    ("x" * REASON_LIMIT, True, "x" * REASON_LIMIT, "exactly the limit is kept whole"),
    (" " + "x" * REASON_LIMIT + " ", True, "x" * REASON_LIMIT, "the limit counts the stripped reason"),
])
def test_it_keeps_a_persons_reason(text, required, expected, why):
    assert person_reason(text, what="a dismissal", required=required) == expected, why


NUL = "the reason for a dismissal must not contain a NUL byte (\\x00)"


@pytest.mark.parametrize(("text", "required", "message", "why"), [
    ("", True, "a dismissal needs a reason", "a required reason may not be empty"),
    (" \t\n", True, "a dismissal needs a reason", "white space alone is no reason"),
    (None, True, "a dismissal needs a reason", "a missing reason is none"),
    ("a\x00b", True, NUL, "PostgreSQL's text cannot hold it"),
    ("a\x00b", False, NUL, "optional or not, it cannot be stored"),
    ("x" * (REASON_LIMIT + 1), True, f"the reason for a dismissal must be at most {REASON_LIMIT} characters, not "
     f"{REASON_LIMIT + 1}", "one character over is refused, not cut unseen"),
    (42, True, "the reason for a dismissal must be text", "a number from a JSON body is no reason"),
])
def test_it_refuses_a_reason_it_cannot_store(text, required, message, why):
    with pytest.raises(ReasonRefused) as refused:
        person_reason(text, what="a dismissal", required=required)
    assert str(refused.value) == message, why


def test_a_system_text_up_to_the_limit_is_kept_whole():
    text = "e" * TEXT_LIMIT
    assert system_text(text) == text


def test_a_system_text_over_the_limit_is_cut_to_it():
    cut = system_text("e" * (TEXT_LIMIT + 1))
    assert "characters cut" in cut and len(cut) <= TEXT_LIMIT


def test_it_keeps_the_root_cause_when_it_cuts_a_long_spark_error():
    text = "\n".join(["py4j.protocol.Py4JJavaError: An error occurred while calling o71.save."]
                     + [f"\tat frame{n}" for n in range(2000)]
                     + ["Caused by: org.apache.kafka.common.errors.TimeoutException: no leader"]
                     + [f"\tat deeper{n}" for n in range(2000)])
    cut = system_text(text, limit=4000)
    assert len(cut) <= 4100
    assert cut.startswith("py4j.protocol.Py4JJavaError")
    assert "Caused by: org.apache.kafka.common.errors.TimeoutException: no leader" in cut
    assert "characters cut" in cut


def test_it_keeps_a_caused_by_line_right_after_the_head():
    lines = [f"line{n:02d}" for n in range(25)] + ["  Caused by: root"] + [f"deep{n:02d}" for n in range(30)]
    text = "\n".join(lines)  # 402 characters
    head = "\n".join(lines[:25])
    # The 25-line head, the indented cause on line 26, then the tail filling the limit less 40 characters.
    assert system_text(text, limit=400) == (
        head + "\n...\n  Caused by: root" + "\n... [42 characters cut] ...\n" + text[-164:]
    )


def test_it_cuts_a_long_head_to_three_quarters_of_the_limit():
    text = "\n".join(f"{'x' * 20}{n:02d}" for n in range(40))  # 919 characters, no cause
    assert system_text(text, limit=400) == text[:300] + "\n... [559 characters cut] ...\n" + text[-60:]


def test_an_error_exactly_at_the_limit_is_kept_whole():
    text = "\n".join(f"line{n:03d}" for n in range(100))
    assert system_text(text, limit=len(text)) == text


def test_it_keeps_every_caused_by_line_in_order():
    lines = [f"line{n:02d}" for n in range(25)] + ["Caused by: a", "\tat x", "Caused by: b"] + ["y" * 30] * 10
    text = "\n".join(lines)
    head = "\n".join(lines[:25])
    cut = system_text(text, limit=400)
    assert cut.startswith(head + "\n...\nCaused by: a\nCaused by: b\n... ["), "the causes, one a line, after the head"


def test_without_a_cause_the_head_is_followed_by_the_cut_marker():
    text = "\n".join(f"line{n:02d}" for n in range(60))  # 419 characters, no cause
    head = "\n".join(f"line{n:02d}" for n in range(25))
    assert system_text(text, limit=400) == head + "\n... [59 characters cut] ...\n" + text[-186:]


def test_a_reason_is_required_unless_said_otherwise():
    with pytest.raises(ReasonRefused, match="a refusal needs a reason"):
        person_reason("  ", what="a refusal")
