"""Geometry of the group page's lag chart: pure (no Django, no database).

The page draws the chart as inline SVG; this module turns time series into
SVG user units, tick positions and tick labels. Everything it returns is a
number or plain text for a text node, so hostile topic names stay text.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

# Windows a person can pick, at most this many points per line, at most this
# many lines (the topics with the highest lag).
CHART_WINDOWS = {"1h": 1, "6h": 6, "24h": 24, "3d": 72, "7d": 168, "30d": 720}
CHART_DEFAULT_WINDOW = "24h"
CHART_MAX_POINTS = 300
CHART_MAX_TOPICS = 8


def chart_window(requested: str | None) -> str:
    """The window asked for in the query string, or the default one."""
    return requested if requested in CHART_WINDOWS else CHART_DEFAULT_WINDOW


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
    "added": partitions added; "picked_up": the group picked one up).
    Labels are returned as plain strings for text nodes."""
    left, right, top, bottom = 64, 16, 36, 40
    plot_width, plot_height = width - left - right, height - top - bottom
    span = max((end - start).total_seconds(), 1.0)
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
        })
    time_format = "%H:%M" if span <= 86400 else "%m-%d %H:%M"
    shown_marks = [
        {"x": x_of(at), "label": f"{at.strftime(time_format)} {label}", "kind": kind}
        for at, label, kind in sorted(marks) if start <= at <= end
    ]
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
