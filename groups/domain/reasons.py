"""The words a job or a finding keeps of why: a person's reason (a
dismissal, a refusal), checked before anything is written, and a system's
error or status text, cut to one size before it is stored, audited or sent.
Pure: the services turn ``ReasonRefused`` into the refusal a page or the API
shows."""

from __future__ import annotations

# The most characters of a person's reason: longer is refused, never cut unseen.
REASON_LIMIT = 1000
# The most characters kept of a system's text (an error, a job's status reason): a Spark
# trace's head, every "Caused by" line and its tail fit.
TEXT_LIMIT = 8000
# A system text longer than the limit keeps its first lines (the exception and its message).
HEAD_LINES = 25


class ReasonRefused(ValueError):
    """A person's reason that cannot be stored, and why, in words."""


def person_reason(text: object, *, what: str, required: bool = True) -> str:
    """``text`` as stored: stripped of surrounding white space. Refused
    (``ReasonRefused``, naming ``what``, the act: "a dismissal") when empty and
    ``required``, when it holds a NUL byte (PostgreSQL's text cannot), or
    when longer than REASON_LIMIT characters. None counts as empty."""
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise ReasonRefused(f"the reason for {what} must be text")
    text = text.strip()
    if not text and required:
        raise ReasonRefused(f"{what} needs a reason")
    if "\x00" in text:
        raise ReasonRefused(f"the reason for {what} must not contain a NUL byte (\\x00)")
    if len(text) > REASON_LIMIT:
        raise ReasonRefused(f"the reason for {what} must be at most {REASON_LIMIT} characters, not {len(text)}")
    return text


def system_text(text: str, limit: int = TEXT_LIMIT) -> str:
    """A system's text (an error, what a job is doing) as stored: whole up to
    ``limit`` characters; longer, cut sensibly: the first lines (the exception
    and its message), every ``Caused by`` line (the root cause), then the
    tail, with how many characters were cut between them."""
    if len(text) <= limit:
        return text
    lines = text.splitlines()
    head = "\n".join(lines[:HEAD_LINES])
    causes = "\n".join(line for line in lines[HEAD_LINES:] if line.lstrip().startswith("Caused by"))
    kept = head + ("\n...\n" + causes if causes else "")
    kept = kept[: limit * 3 // 4]
    tail = text[-(limit - len(kept) - 40):]
    return f"{kept}\n... [{len(text) - len(kept) - len(tail)} characters cut] ...\n{tail}"
