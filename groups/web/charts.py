"""Geometry of the group page's lag chart: pure (no Django, no database).

The page draws the chart as inline SVG; this module turns time series into
SVG user units, tick positions and tick labels. Everything it returns is a
number or plain text for a text node, so hostile topic names stay text.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

# Windows a person can pick (hours), at most this many points per line, at
# most this many lines (the topics with the highest lag). "fit" (the default)
# is the window that fits the group's events: see ``fit_start``.
CHART_WINDOWS = {"1h": 1, "6h": 6, "24h": 24, "3d": 72, "7d": 168, "30d": 720}
CHART_FIT = "fit"
CHART_DEFAULT_WINDOW = CHART_FIT
CHART_MAX_POINTS = 300
CHART_MAX_TOPICS = 8
FIT_AT_LEAST = timedelta(minutes=10)


def chart_window(requested: str | None) -> str:
    """The window asked for in the query string, or the default one."""
    return requested if requested in CHART_WINDOWS or requested == CHART_FIT else CHART_DEFAULT_WINDOW


def fit_start(*, now: datetime, first_event: datetime | None, first_sample: datetime | None) -> datetime:
    """Where the "fit" window starts: a quarter of the time since the first
    event (a partition added, a pickup) before it, so the lag before it
    shows; without events, the first lag sample; without either, 24 hours
    ago. At least ten minutes, at most the longest window."""
    if first_event is not None:
        start = first_event - (now - first_event) / 4
    elif first_sample is not None:
        start = first_sample
    else:
        start = now - timedelta(hours=24)
    longest = timedelta(hours=max(CHART_WINDOWS.values()))
    return min(max(start, now - longest), now - FIT_AT_LEAST)


def span_text(span: timedelta) -> str:
    """"26 min", "5 h", "3 d": a window's length for its title."""
    minutes = round(span.total_seconds() / 60)
    if minutes < 120:
        return f"{minutes} min"
    if minutes < 48 * 60:
        return f"{round(minutes / 60)} h"
    return f"{round(minutes / 1440)} d"


def nice_step(raw: float) -> int:
    """The smallest 1, 2 or 5 times a power of ten that is >= raw (at least 1)."""
    if raw <= 1:
        return 1
    magnitude = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if factor * magnitude >= raw:
            return int(factor * magnitude)
    return int(10 * magnitude)


def short_number(value: int) -> str:
    """A tick label: thousands separators below 10,000, then k, M, G, T."""
    for limit, suffix in ((10**12, "T"), (10**9, "G"), (10**6, "M"), (10**4, "k")):
        if abs(value) >= limit:
            return f"{value / (limit if suffix != 'k' else 1000):.3g}{suffix}"
    return f"{value:,}"


def lag_chart(
    *, series: list[tuple[str, list[tuple[datetime, int]]]], start: datetime, end: datetime,
    width: int = 900, height: int = 280, marks: list[tuple[datetime, str, str]] = (),
) -> dict:
    """Geometry of the lag chart in SVG user units: one polyline per
    (label, points) series, y ticks at a 1-2-5 step from 0, five x ticks,
    and a vertical line per (at, label, kind) mark inside the window (kind
    "added": partitions added; "picked_up": the group picked one up), its
    label placed at the top on one of three rows so neighbours do not
    overprint. Each line's ``dots`` carry every point's value and time for a
    hover title and the values table. Labels are plain strings for text nodes."""
    left, right, top, bottom = 64, 16, 36, 40
    plot_width, plot_height = width - left - right, height - top - bottom
    span = max((end - start).total_seconds(), 1.0)
    time_format = "%H:%M" if span <= 86400 else "%m-%d %H:%M"
    point_format = "%Y-%m-%d %H:%M:%S UTC"
    peak = max((lag for _, points in series for _, lag in points), default=0)
    step = nice_step(peak / 4)
    y_max = step * max(1, math.ceil(peak / step))

    def x_of(at: datetime) -> float:
        return round(left + (at - start).total_seconds() / span * plot_width, 1)

    def y_of(lag: int) -> float:
        return round(top + plot_height - max(lag, 0) / y_max * plot_height, 1)

    lines = []
    for index, (label, points) in enumerate(series):
        if not points:
            continue
        lines.append({
            "label": label, "index": index,
            "points": " ".join(f"{x_of(at)},{y_of(lag)}" for at, lag in points),
            "last_x": x_of(points[-1][0]), "last_y": y_of(points[-1][1]), "last_lag": points[-1][1],
            "count": len(points),
            "dots": [{"x": x_of(at), "y": y_of(lag), "lag": lag, "at": at.strftime(point_format)}
                     for at, lag in points],
        })
    shown_marks = []
    for at, label, kind in sorted(marks):
        if start <= at <= end:
            x, row = x_of(at), len(shown_marks) % 3
            shown_marks.append({
                "x": x, "label": f"{at.strftime(time_format)} {label}", "kind": kind,
                # The label reads rightwards from its line, or leftwards near the right edge.
                "text_x": round(x + 4 if x < left + plot_width * 0.6 else x - 4, 1),
                "anchor": "start" if x < left + plot_width * 0.6 else "end",
                "text_y": top + 10 + 12 * row,
            })
    return {
        "marks": shown_marks,
        "width": width, "height": height, "left": left, "right": width - right, "top": top,
        "bottom": top + plot_height, "middle_x": left + plot_width // 2, "middle_y": top + plot_height // 2,
        "y_ticks": [{"y": y_of(value), "label": short_number(value)} for value in range(0, y_max + 1, step)],
        "x_ticks": [
            {"x": round(left + i / 4 * plot_width, 1),
             "label": (start + timedelta(seconds=span * i / 4)).strftime(time_format)}
            for i in range(5)
        ],
        "lines": lines,
    }
