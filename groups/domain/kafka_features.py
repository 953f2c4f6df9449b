"""What a cluster's Kafka release lacks, from the feature levels it
finalized (``Admin.describeFeatures``): a kind of group whose feature is
missing or at level 0 is absent there, and the clusters page says so with
the release (``metadata.version`` "3.9-IV0" is Kafka 3.9)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from groups.domain.snapshot import Snapshot

SHARE_RESET = "share.auto.offset.reset"
# Kafka 4.4 starts a share group left at the default (latest) on a partition
# added to a topic it already reads at offset 0 (KAFKA-20742; REFERENCE.md,
# checked on 4.4.0). An explicit latest was not checked and keeps its rule.
SHARE_ADDED_AT_ZERO_FROM = (4, 4)

# (feature, the lowest finalized level that serves it, what it serves). Kafka
# finalizes group.version=1 from 4.0 (KIP-848 consumer groups), share.version
# and streams.version from 4.2 (KIP-932, KIP-1071); before that they are
# missing, or early access at level 0.
GROUP_KIND_FEATURES = (
    ("group.version", 1, "KIP-848 consumer groups"),
    ("share.version", 1, "share groups"),
    ("streams.version", 1, "streams groups"),
)


def kafka_release(metadata_version: str) -> str:
    """The release a ``metadata.version`` names: "3.9-IV0" -> "3.9"."""
    return metadata_version.split("-", 1)[0]


def features_absent(*, metadata_version: str, levels: Mapping[str, int]) -> list[str]:
    """One sentence per kind of group the cluster does not serve, e.g. "no
    share groups: this cluster runs Kafka 3.9"; empty when it serves them all."""
    runs = f"this cluster runs Kafka {kafka_release(metadata_version)}" if metadata_version else \
        "this cluster does not say which Kafka it runs"
    return [f"no {what}: {runs}" for feature, lowest, what in GROUP_KIND_FEATURES
            if levels.get(feature, 0) < lowest]


def release_at_least(metadata_version: str, release: tuple[int, int]) -> bool | None:
    """Whether ``metadata.version`` ("4.4-IV0") names ``release`` or later;
    None when it names no release this code can read."""
    parts = kafka_release(metadata_version).split(".")
    if len(parts) < 2 or not all(part.isdigit() for part in parts[:2]):
        return None
    return (int(parts[0]), int(parts[1])) >= release


def share_reset(setting: str) -> tuple[str, bool]:
    """A share group's start rule from the poll's words
    ("share.auto.offset.reset=latest (the broker's default)"): the value, and
    whether it is the broker's default; ("latest", True) when none is stored."""
    prefix = f"{SHARE_RESET}="
    if not setting.startswith(prefix):
        return "latest", True
    value, _, origin = setting[len(prefix):].partition(" ")
    return value, origin != "(set on the group)"


def share_groups_on_release(*, snapshot: Snapshot, metadata_version: str) -> Snapshot:
    """The snapshot with each share group's start rule as the cluster's
    release applies it: from Kafka 4.4 a group left at the default latest
    starts an added partition at offset 0 (KAFKA-20742), so its rule is
    earliest there, said in words. Elsewhere, or on a release this code
    cannot read, the snapshot as it is (latest: the sound lower bound stays)."""
    if not release_at_least(metadata_version, SHARE_ADDED_AT_ZERO_FROM):
        return snapshot
    release = kafka_release(metadata_version)

    def applied(group):
        if group.type != "share" or group.reset_policy != "latest" or share_reset(group.reset_setting) != (
                "latest", True):
            return group
        return replace(group, reset_policy="earliest", reset_setting=(
            f"{group.reset_setting}, which Kafka {release} applies to an added partition of a topic the group "
            "already reads as offset 0 (KAFKA-20742)"))

    return replace(snapshot, groups=tuple(applied(group) for group in snapshot.groups))
