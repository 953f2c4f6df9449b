"""Presentation text (groups.text): the one CSV cell rule and partition lists."""

from __future__ import annotations

import csv
import io

import pytest

from groups.text import csv_cell, detail_rows, duration_words, partition_ranges, stored_words


def test_it_formats_partition_lists_as_ranges():
    assert partition_ranges([0, 1, 2, 5, 7, 8]) == "0–2, 5, 7–8"
    assert partition_ranges([]) == ""
    assert partition_ranges([9, 3]) == "3, 9"


@pytest.mark.parametrize(("partitions", "expected", "why"), [
    ([4], "4", "a single partition is not a range"),
    ([3, 3, 4], "3–4", "duplicates count once"),
    ([0, 2], "0, 2", "a gap of one partition breaks the range"),
])
def test_it_formats_edge_cases_of_partition_lists(partitions, expected, why):
    assert partition_ranges(partitions) == expected, why


@pytest.mark.parametrize(("value", "expected"), [
    ("=HYPERLINK(\"x\")", "'=HYPERLINK(\"x\")"), ("+1", "'+1"), ("-2", "'-2"), ("@SUM(A1)", "'@SUM(A1)"),
    ("plain", "plain"), (None, ""), (12, "12"),
])
def test_it_defuses_spreadsheet_formulas_in_csv_cells(value, expected):
    assert csv_cell(value) == expected


@pytest.mark.parametrize(("value", "expected", "why"), [
    ("\t=1+1", "'\t=1+1", "a leading tab can still start a formula in some spreadsheets"),
    ("\r=1+1", "'\r=1+1", "so can a leading carriage return"),
    (-3, "-3", "a number is written as the number: -3 is a value, not a formula"),
    (2.5, "2.5", "floats too"),
    (True, "True", "a bool is text, not a number"),
    ("a=b", "a=b", "only a leading formula character matters"),
    ("", "", "empty text stays empty"),
])
def test_it_writes_numbers_as_numbers_and_text_defused(value, expected, why):
    assert csv_cell(value) == expected, why


@pytest.mark.parametrize("group_id", [
    'billing,"eu"\nline two', "team|x;y", "<script>alert(1)</script>", "=cmd|' /C calc'!A0",
])
def test_it_keeps_hostile_group_ids_intact_through_the_csv_module(group_id):
    buffer = io.StringIO()
    csv.writer(buffer).writerow([csv_cell(group_id), csv_cell(7)])
    (cell, offset), = csv.reader(io.StringIO(buffer.getvalue()))
    assert cell.removeprefix("'") == group_id
    assert cell.startswith("'") == group_id.startswith("=")
    assert offset == "7"


@pytest.mark.parametrize(("value", "expected", "why"), [
    (True, "yes", "a boolean is a word, never Python's True"),
    (False, "no", "the same for false"),
    (None, "none", "null is a word, never None"),
    ({"accepted": True}, "accepted: yes", "a mapping is key: value pairs, never a dict"),
    ({"2": 0, "3": 0}, "2: 0; 3: 0", "offsets by partition read as pairs"),
    ({"repaired_after": 4}, "repaired after: 4", "keys are words"),
    (["a", None, 3], "a, none, 3", "a list is comma separated"),
    ([], "none", "an empty list says so"),
    ({}, "none", "so does an empty mapping"),
    ("billing_eu", "billing_eu", "text (a group id) keeps its underscores"),
    (0, "0", "a number stays the number"),
])
def test_stored_values_read_as_words(value, expected, why):
    assert stored_words(value) == expected, why


@pytest.mark.parametrize(("detail", "expected", "why"), [
    ({"before": {"enabled": True}, "after": {"enabled": False}, "reason": "maintenance"},
     [("enabled", "yes → no"), ("reason", "maintenance")], "a change reads old → new, then the other keys"),
    ({"before": {"sink": "parquet"}, "after": {"sink": "kafka", "replay_topic": "x_replay"}},
     [("sink", "parquet → kafka"), ("replay topic", "— → x_replay")], "a field only after has no old value"),
    ({"params": {"target": "earliest", "value": None}, "kind": "reset"},
     [("kind", "reset"), ("params", "target: earliest; value: none")], "no before/after: keys in name order"),
    ("free text", [("detail", "free text")], "a detail that is not a mapping is shown as it is"),
])
def test_an_audit_detail_reads_as_rows_of_words(detail, expected, why):
    assert detail_rows(detail) == expected, why


@pytest.mark.parametrize(("seconds", "expected", "why"), [
    (0.25, "250 ms", "below a second: milliseconds"),
    (4.25, "4.2 s", "below a minute: tenths (rounded half to even)"),
    (12.345, "12.3 s", "below a minute: tenths, as a job's run time is read beside client logs"),
    (10.01, "10 s", "a whole second without its '.0'"),
    (59.97, "1 min", "rounding up to a minute says so, never '60.0 s'"),
    (245, "4 min 5 s", "minutes and seconds"),
    (240, "4 min", "a zero second unit is left out"),
    (7830, "2 h 10 min", "hours and minutes: seconds no longer matter"),
    (3 * 86400 + 4 * 3600 + 59, "3 d 4 h", "days and hours"),
    (-90, "-1 min 30 s", "a negative duration keeps its sign"),
])
def test_durations_read_in_their_two_largest_units(seconds, expected, why):
    assert duration_words(seconds) == expected, why
