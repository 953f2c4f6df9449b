"""The README's "Supported Kafka" table names exactly the releases the suite
runs (third_party/maven/kafka-release/releases and the local broker's
kafka.version), and what each lacks is what the clusters page says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from groups.domain.kafka_features import features_absent, kafka_release, share_groups_on_release
from groups.domain.snapshot import GroupSnapshot, Snapshot

ROOT = Path(__file__).resolve().parents[2]


def supported_table() -> dict[str, str]:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### Supported Kafka"):]
    section = section[:section.index("\n#")]
    rows = [line.split("|")[1:-1] for line in section.splitlines() if re.match(r"\| \d", line)]
    return {cells[0].strip(): cells[2].strip() for cells in rows}


def test_it_lists_exactly_the_releases_the_suite_runs():
    older = (ROOT / "third_party/maven/kafka-release/releases").read_text().split()
    main = re.search(r"<kafka.version>(.+)</kafka.version>", (ROOT / "third_party/maven/pom.xml").read_text()).group(1)
    assert sorted(supported_table()) == sorted([*older, main])


@pytest.mark.parametrize(("metadata_version", "levels", "absent"), [
    # 3.7 finalizes only metadata.version: no kind of group beyond the classic one.
    ("3.7-IV4", {"metadata.version": 19}, ["KIP-848 consumer groups", "share groups", "streams groups"]),
    # 3.9 knows group.version but leaves it at 0.
    ("3.9-IV0", {"metadata.version": 21, "group.version": 0}, ["KIP-848 consumer groups", "share groups",
                                                             "streams groups"]),
    ("4.0-IV3", {"metadata.version": 25, "group.version": 1}, ["share groups", "streams groups"]),
    # A release that serves a feature only at level 0 (early access) lacks it.
    ("4.1-IV1", {"group.version": 1, "share.version": 0, "streams.version": 0}, ["share groups", "streams groups"]),
    ("4.4-IV0", {"group.version": 1, "share.version": 2, "streams.version": 1}, []),
])
def test_a_kind_of_group_whose_feature_is_missing_or_at_level_0_is_absent(metadata_version, levels, absent):
    release = kafka_release(metadata_version)
    assert features_absent(metadata_version=metadata_version, levels=levels) == [
        f"no {what}: this cluster runs Kafka {release}" for what in absent]


def test_a_cluster_that_does_not_name_its_release_is_said_so():
    # No metadata.version read (a describeFeatures refused): the sentence still says why, without a release.
    assert features_absent(metadata_version="", levels={}) == [
        f"no {what}: this cluster does not say which Kafka it runs"
        for what in ("KIP-848 consumer groups", "share groups", "streams groups")]


def test_the_table_says_what_each_release_lacks_as_the_page_does():
    table = supported_table()
    assert table["3.9.1"] == "KIP-848 consumer groups, share groups, streams groups"
    assert table["4.0.2"] == "share groups, streams groups"


# --- a share group's start rule on the cluster's release (KAFKA-20742) ------


DEFAULT_LATEST = "share.auto.offset.reset=latest (the broker's default)"


def _share(reset_policy: str, reset_setting: str, kind: str = "share") -> GroupSnapshot:
    return GroupSnapshot(group_id="q", state="Stable", type=kind, assignor="simple", members=(),
                         reset_policy=reset_policy, reset_setting=reset_setting)


@pytest.mark.parametrize("metadata_version, group, policy, why", [
    ("4.4-IV2", _share("latest", DEFAULT_LATEST), "earliest",
     "4.4 starts a default share group on an added partition at 0: earliest there"),
    ("5.0-IV0", _share("latest", DEFAULT_LATEST), "earliest", "a later release keeps 4.4's behaviour"),
    ("4.3-IV0", _share("latest", DEFAULT_LATEST), "latest", "4.3 started it at the end: latest stays"),
    ("", _share("latest", DEFAULT_LATEST), "latest", "release not known yet: the sound latest stays"),
    ("4.4-IV2", _share("latest", "share.auto.offset.reset=latest (set on the group)"), "latest",
     "an explicit latest was not checked on 4.4: its rule stays"),
    ("4.4-IV2", _share("by_duration", "share.auto.offset.reset=by_duration:PT1H (set on the group)"), "by_duration",
     "by_duration is not the default"),
    ("4.4-IV2", _share("latest", DEFAULT_LATEST, kind="consumer"), "latest", "only share groups"),
])
def test_a_share_groups_rule_follows_its_clusters_release(metadata_version, group, policy, why):
    snapshot = Snapshot(cluster="c", taken_at=None, topics=(), groups=(group,))
    (applied,) = share_groups_on_release(snapshot=snapshot, metadata_version=metadata_version).groups
    assert applied.reset_policy == policy, why
    if policy == group.reset_policy:
        assert applied == group, why
    else:
        assert applied.reset_setting == (f"{DEFAULT_LATEST}, which Kafka {metadata_version.split('-')[0]} applies to "
                                         "an added partition of a topic the group already reads as offset 0 "
                                         "(KAFKA-20742)"), why


def test_the_compose_file_runs_the_release_every_test_runs():
    """docker-compose.yml's broker is the local broker's release (third_party/maven/pom.xml's
    kafka.version), which the whole suite runs: the stack users start is the one tested."""
    main = re.search(r"<kafka.version>(.+)</kafka.version>", (ROOT / "third_party/maven/pom.xml").read_text()).group(1)
    images = re.findall(r"image: apache/kafka:(\S+)", (ROOT / "docker-compose.yml").read_text())
    assert images == [main]
    assert main in supported_table()
