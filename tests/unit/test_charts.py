"""The lag chart's geometry (groups.web.charts): pure, no database."""

from datetime import UTC, datetime, timedelta

import pytest

from groups.web.charts import CHART_DEFAULT_WINDOW, chart_window, fit_start, lag_chart, nice_step, short_number

START = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(("raw", "step", "why"), [
    (0, 1, "no lag still gets a step of 1"),
    (1, 1, "1 is a 1-2-5 number"),
    (1.5, 2, "next 1-2-5 number up"),
    (3, 5, "2 < 3 <= 5"),
    (7, 10, "5 < 7: the next power of ten"),
    (20, 20, "exact 2 x 10"),
    (2001, 5000, "just above 2 x 10^3"),
])
def test_it_picks_the_smallest_1_2_5_step_at_or_above(raw, step, why):
    assert nice_step(raw) == step, why


@pytest.mark.parametrize(("value", "label"), [
    (0, "0"), (9_999, "9,999"), (10_000, "10k"), (2_500_000, "2.5M"), (3 * 10**9, "3G"), (10**12, "1T"),
])
def test_it_shortens_tick_labels(value, label):
    assert short_number(value) == label


def test_it_falls_back_to_the_default_window_for_unknown_input():
    assert chart_window("6h") == "6h"
    assert chart_window("999h") == CHART_DEFAULT_WINDOW
    assert chart_window(None) == CHART_DEFAULT_WINDOW


def test_it_places_points_in_the_plot_area_and_ticks_from_zero():
    end = START + timedelta(hours=1)
    chart = lag_chart(series=[("orders", [(START, 0), (end, 400)]), ("empty", [])], start=START, end=end,
                      width=900, height=280)
    # Plot area: x from 64 to 884, y from 36 (top, the peak) to 240 (zero lag).
    [line] = chart["lines"]
    assert {key: value for key, value in line.items() if key != "dots"} == {
        "label": "orders", "index": 0, "points": "64.0,240.0 884.0,36.0", "last_x": 884.0, "last_y": 36.0,
        "last_lag": 400, "count": 2}
    assert [tick["label"] for tick in chart["y_ticks"]] == ["0", "100", "200", "300", "400"]
    assert [tick["label"] for tick in chart["x_ticks"]] == ["00:00", "00:15", "00:30", "00:45", "01:00"]


def test_it_labels_days_when_the_window_is_longer_than_one():
    end = START + timedelta(days=3)
    chart = lag_chart(series=[], start=START, end=end)
    assert chart["x_ticks"][0]["label"] == "01-01 00:00"
    assert chart["lines"] == []
    assert [tick["label"] for tick in chart["y_ticks"]] == ["0", "1"]


def test_it_places_marks_inside_the_window_and_drops_the_others():
    end = START + timedelta(hours=1)
    marks = [
        (START + timedelta(minutes=30), "orders: partition 2 added", "added"),
        (START + timedelta(minutes=45), "orders[2] picked up by the group", "picked_up"),
        (START - timedelta(minutes=1), "before the window", "added"),
    ]
    chart = lag_chart(series=[], start=START, end=end, marks=marks)
    # x runs from 64 (start) to 884 (end): half way is 474, three quarters 679.
    assert [{key: mark[key] for key in ("x", "label", "kind")} for mark in chart["marks"]] == [
        {"x": 474.0, "label": "00:30 orders: partition 2 added", "kind": "added"},
        {"x": 679.0, "label": "00:45 orders[2] picked up by the group", "kind": "picked_up"},
    ]


NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("first_event", "first_sample", "start", "why"), [
    (NOW - timedelta(minutes=20), NOW - timedelta(hours=3), NOW - timedelta(minutes=25),
     "a partition added 20 min ago: a quarter of that (5 min) before it, not the 24 h that squashed it"),
    (NOW - timedelta(minutes=4), None, NOW - timedelta(minutes=10), "ten minutes at least"),
    (None, NOW - timedelta(hours=2), NOW - timedelta(hours=2), "no events: from the first lag sample"),
    (None, None, NOW - timedelta(hours=24), "nothing at all: the last day"),
    (NOW - timedelta(days=40), None, NOW - timedelta(days=30), "never longer than the longest window"),
])
def test_the_fit_window_starts_before_the_first_event(first_event, first_sample, start, why):
    assert fit_start(now=NOW, first_event=first_event, first_sample=first_sample) == start, why


def test_mark_labels_take_turns_on_three_rows_and_read_away_from_the_right_edge():
    end = START + timedelta(hours=1)
    marks = [(START + timedelta(minutes=m), f"mark {m}", "added") for m in (10, 11, 12, 13, 55)]
    chart = lag_chart(series=[], start=START, end=end, marks=marks)
    assert [m["text_y"] for m in chart["marks"]] == [46, 58, 70, 46, 58]
    assert [m["anchor"] for m in chart["marks"]] == ["start"] * 4 + ["end"]


def test_every_point_carries_its_value_and_time():
    chart = lag_chart(series=[("orders", [(START, 5), (START + timedelta(minutes=30), 12)])], start=START,
                      end=START + timedelta(hours=1))
    assert [(d["lag"], d["at"]) for d in chart["lines"][0]["dots"]] == [
        (5, START.strftime("%Y-%m-%d %H:%M:%S UTC")), (12, (START + timedelta(minutes=30)).strftime(
            "%Y-%m-%d %H:%M:%S UTC"))]
