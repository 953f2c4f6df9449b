"""The one list of a finding's states: the core decides them
(``groups.domain.detection``), ``Finding.State`` is built from them, and
planning, triage and the services name them from here."""

from __future__ import annotations

from typing import Literal

FindingStatus = Literal["pending", "undecided", "unowned", "covered", "gap", "expired"]

PENDING: FindingStatus = "pending"  # nobody took the partition yet: every message at risk
UNDECIDED: FindingStatus = "undecided"  # taken, no first commit yet: no upper bound
UNOWNED: FindingStatus = "unowned"  # nobody took it for the polls that make it so
COVERED: FindingStatus = "covered"  # the group started at the log start: nothing missed
GAP: FindingStatus = "gap"  # missed, with its bounds
EXPIRED: FindingStatus = "expired"  # retention deleted part of the missed range (the rest is repairable)

# Nobody has taken these partitions yet: what the group will skip is not known.
UNTAKEN: tuple[FindingStatus, ...] = (PENDING, UNOWNED)
# Missed, with the upper bound known (the first commit): the sound range is decided,
# what a pre-approved or an expansion's repair replays.
MISSED_DECIDED: tuple[FindingStatus, ...] = (GAP, EXPIRED)
