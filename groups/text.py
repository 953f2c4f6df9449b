"""Presentation text shared by pages, exports and commands: pure, no Django.

``stored_words`` and ``detail_rows`` are the one way pages show stored
structured data (a job's parameters, an audit row's detail) to people: keys as
words, yes/no for booleans, nothing printed as Python or JSON.

``duration_words`` is the one way pages write a duration.

``csv_cell`` is the one rule for every CSV cell Gapwatch writes (the audit
export, the reset export). Group ids and topic names are hostile text: the
csv module quotes commas, quotes and line breaks, so they round-trip intact;
a text cell a spreadsheet would read as a formula (OWASP "CSV injection")
gets a leading apostrophe and is otherwise kept as it is. defusedcsv was not
used: it also rewrites '|' inside a cell, which would change group ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

# What spreadsheets start a formula with, tab and CR included.
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> str:
    """One CSV cell: None is empty, a number is written as the number (a
    negative offset is a number, not a formula), any other value as text with
    a leading formula character defused."""
    if value is None:
        return ""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    text = str(value)
    return "'" + text if text.startswith(FORMULA_PREFIXES) else text


def partition_ranges(partitions: Iterable[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` → ``"0–2, 5, 7–8"``."""
    numbers = sorted(set(partitions))
    parts: list[str] = []
    start = previous = None
    for number in [*numbers, None]:
        if start is not None and number == previous + 1:
            previous = number
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}–{previous}")
        start = previous = number
    return ", ".join(parts)


def text_table(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    """A plain-text table for the command line, one string per line: the
    header, then the rows, each column as wide as its widest cell, two spaces
    apart, no trailing spaces."""
    text = [tuple(columns)] + [tuple(str(cell) for cell in row) for row in rows]
    widths = [max(len(row[i]) for row in text) for i in range(len(columns))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in text]


def key_words(key: object) -> str:
    """A stored key as words: ``repaired_after`` → "repaired after"."""
    return str(key).replace("_", " ")


def stored_words(value: object) -> str:
    """A stored (JSON) value in words: yes or no, "none" for null, a list comma
    separated, a mapping as "key: value" pairs; text and numbers as they are
    (a group id keeps its underscores)."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return "; ".join(f"{key_words(key)}: {stored_words(item)}" for key, item in value.items()) or "none"
    if isinstance(value, list | tuple):
        return ", ".join(stored_words(item) for item in value) or "none"
    return str(value)


def detail_rows(detail: object) -> list[tuple[str, str]]:
    """An audit row's detail as (label, words) rows: each field a "before"
    and "after" pair name, as "old → new" ("—" where one side lacks it), then
    the other keys in name order."""
    if not isinstance(detail, dict):
        return [("detail", stored_words(detail))]
    before, after = detail.get("before"), detail.get("after")
    rows = []
    rest = detail
    if isinstance(before, dict) and isinstance(after, dict):
        for field in [*before, *(name for name in after if name not in before)]:
            old = stored_words(before[field]) if field in before else "—"
            new = stored_words(after[field]) if field in after else "—"
            rows.append((key_words(field), f"{old} → {new}"))
        rest = {key: value for key, value in detail.items() if key not in ("before", "after")}
    return rows + [(key_words(key), stored_words(value)) for key, value in sorted(rest.items())]


# (seconds in the unit, its short name), largest first.
_DURATION_UNITS = ((86400, "d"), (3600, "h"), (60, "min"), (1, "s"))


def duration_words(seconds: float) -> str:
    """A duration in its two largest units: "850 ms" below a second, tenths
    below a minute ("4.2 s", "12.3 s"), then whole units:
    "4 min 5 s", "2 h 10 min", "3 d 4 h" (a zero second unit left out)."""
    if seconds < 0:
        return "-" + duration_words(-seconds)
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    if seconds < 60:
        # Tenths, a whole second without its ".0" ("10 s").
        return f"{seconds:.1f}".removesuffix(".0") + " s" if round(seconds, 1) < 60 else "1 min"
    whole = round(seconds)
    for index, (size, name) in enumerate(_DURATION_UNITS[:-1]):
        if whole >= size:
            first, rest = divmod(whole, size)
            next_size, next_name = _DURATION_UNITS[index + 1]
            second = rest // next_size
            return f"{first} {name} {second} {next_name}" if second else f"{first} {name}"
    return f"{whole} s"
