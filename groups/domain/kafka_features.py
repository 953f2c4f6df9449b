"""What a cluster's Kafka release lacks, from the feature levels it
finalized (``Admin.describeFeatures``): a kind of group whose feature is
missing or at level 0 is absent there, and the clusters page says so with
the release (``metadata.version`` "3.9-IV0" is Kafka 3.9)."""

from __future__ import annotations

from collections.abc import Mapping

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
