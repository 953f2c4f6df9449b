"""The architecture is checked, not only described: the import contracts in
pyproject.toml ([tool.importlinter]; see docs/ARCHITECTURE.md) must all hold.
Among them: imports run controlplane -> tasks -> groups, groups never imports
tasks, the pure domain imports no Django or Kafka, and no import circles. Every
write (an ORM write or an audit row) is in groups/services (issue 20), and every
read of stored rows in groups/selectors or the service that writes them (issue 34)."""

from __future__ import annotations

import ast
import re
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("controlplane", "groups", "tasks", "adapters", "demo")


def lint_imports(root: Path = ROOT) -> subprocess.CompletedProcess:
    """Run the checker on the project at ``root`` with the contracts in its pyproject.toml."""
    command = [str(Path(sys.executable).with_name("lint-imports")), "--no-cache", "--no-logo"]
    return subprocess.run(command, cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                          capture_output=True, text=True, timeout=120)


def test_every_import_contract_is_kept():
    result = lint_imports()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_a_service_importing_a_task_breaks_the_contracts(tmp_path):
    """The check can fail: a copy of the project where a service imports a task."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with (tmp_path / "groups" / "services" / "dispatch.py").open("a") as module:
        module.write("\nfrom tasks.celery_tasks import run_remediation_job  # noqa: E402\n")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert "groups.services.dispatch -> tasks.celery_tasks" in result.stdout


# --- Every write through services (issue 20) --------------------------------

# ORM calls that write rows, on a manager or queryset (``X.objects...``).
ORM_WRITES = {"create", "bulk_create", "get_or_create", "update_or_create", "bulk_update", "update", "delete"}
# Code that writes on purpose outside groups/services, and why.
WRITES_ALLOWED = {
    "groups/roles.py": "creates the role groups; the migration runs it with its historical models",
}


def writes_in(source: str) -> list[str]:
    """Each write call in ``source``, as text: an ORM write on ``….objects…``, or an audit row."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ORM_WRITES and ".objects" in f".{ast.unparse(func.value)}":
            found.append(ast.unparse(func))
        elif isinstance(func, ast.Name) and func.id == "audit_record":
            found.append("audit_record")
    return found


def writes_outside_services(root: Path = ROOT) -> dict[str, list[str]]:
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            name = path.relative_to(root).as_posix()
            if name.startswith("groups/services/") or "/migrations/" in name or name in WRITES_ALLOWED:
                continue
            writes = writes_in(path.read_text())
            if writes:
                found[name] = writes
    return found


def test_every_write_goes_through_a_service():
    assert writes_outside_services() == {}, "move these writes behind groups/services"


@pytest.mark.parametrize("source, expected", [
    ("RemediationJob.objects.filter(id=1).update(status='x')", ["RemediationJob.objects.filter(id=1).update"]),
    ("Cluster.objects.update_or_create(name='a')", ["Cluster.objects.update_or_create"]),
    ("get_user_model().objects.get_or_create(username='a')", ["get_user_model().objects.get_or_create"]),
    ("audit_record(action='x')", ["audit_record"]),
    ("Finding.objects.filter(id=1).delete()", ["Finding.objects.filter(id=1).delete"]),
    ("filters.update(a=1); self.files.delete(path); Finding.objects.filter(id=1)", []),
])
def test_the_write_check_sees_a_write(source, expected):
    """The check can fail: each ORM write or audit row in a snippet is found; dict updates and reads are not."""
    assert writes_in(source) == expected


# --- Every read through selectors (issue 34) --------------------------------

# Queryset methods only the ORM has: in tasks/ (the adapters) even on a related manager.
ORM_ONLY_METHODS = {"select_related", "prefetch_related", "values_list", "annotate", "aggregate", "only", "defer"}
READS_ALLOWED = {
    "groups/roles.py": "creates the role groups; the migration runs it with its historical models",
}


def reads_in(source: str, *, adapter: bool = False) -> list[str]:
    """Each read of stored rows in ``source``, as text: a model manager
    (``X.objects``), and in an adapter (``adapter``) also an ORM-only queryset
    method on anything (``job.findings.values_list(...)``). A page may still
    order, page and follow the relations of rows a selector gave it."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "objects":
            found.append(ast.unparse(node))
        elif (adapter and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ORM_ONLY_METHODS):
            found.append(ast.unparse(node.func))
    return found


def reads_outside_selectors(root: Path = ROOT) -> dict[str, list[str]]:
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            name = path.relative_to(root).as_posix()
            if (name.startswith(("groups/services/", "groups/selectors/")) or "/migrations/" in name
                    or name in READS_ALLOWED):
                continue
            reads = reads_in(path.read_text(), adapter=name.startswith(("tasks/", "adapters/")))
            if reads:
                found[name] = reads
    return found


def test_every_read_goes_through_a_selector():
    """Stored state is read in groups/selectors (or by the service that
    writes it), once, and handed down: no ORM read in tasks/, the pages, the
    API, the commands or the health check."""
    assert reads_outside_selectors() == {}, "move these reads into groups/selectors"


@pytest.mark.parametrize("source, adapter, expected", [
    ("Cluster.objects.get(id=1)", False, ["Cluster.objects"]),
    ("get_user_model().objects.filter(username='a').first()", False, ["get_user_model().objects"]),
    ("dict(RemediationJob.objects.filter(id__in=ids).values_list('id', 'status'))", False, ["RemediationJob.objects"]),
    ("job.findings.values_list('topic__name', 'partition')", True, ["job.findings.values_list"]),
    ("job.findings.values_list('topic__name', 'partition')", False, []),
    ("queryset.order_by('-id'); group.group_topics.all(); settings.objects_limit", False, []),
])
def test_the_read_check_sees_a_read(source, adapter, expected):
    """The check can fail: a manager read anywhere, an ORM-only method in an adapter; ordering a selector's rows is not a read."""
    assert reads_in(source, adapter=adapter) == expected


def test_a_task_reading_a_row_breaks_the_read_rule(tmp_path):
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "poll.py").write_text("from groups.models import Cluster\ncluster = Cluster.objects.get(id=1)\n")
    for package in ("controlplane", "groups", "demo"):
        (tmp_path / package).mkdir()
    assert reads_outside_selectors(tmp_path) == {"tasks/poll.py": ["Cluster.objects"]}


CONFLICT_MARKER = re.compile(r"^(<{7}|>{7}) ", re.MULTILINE)


def conflict_markers(paths: list[Path]) -> list[str]:
    """Files holding a merge's conflict markers ("<<<<<<< ours" ... ">>>>>>> theirs" at a line's start)."""
    return [str(path) for path in paths if CONFLICT_MARKER.search(path.read_text(errors="replace"))]


def test_no_file_in_git_holds_a_merge_conflict_marker():
    """A merge once left both sides of a conflict in the clusters page: every
    operator saw the markers, and no page test looked for them."""
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    paths = [ROOT / name for name in listed if (ROOT / name).is_file() and not name.endswith((".png", ".jar", ".gz"))]
    assert conflict_markers(paths) == []


def test_the_conflict_marker_check_can_fail(tmp_path):
    page = tmp_path / "page.html"
    page.write_text("<td>\n<<<<<<< ours\na\n=======\nb\n>>>>>>> theirs\n</td>\n")
    assert conflict_markers([page]) == [str(page)]


# --- One factory for a cluster's Kafka clients (issue 45) ----------------------

CLIENT_CLASSES = {"KafkaAdapter", "JavaAdmin"}
# The one place outside the adapters that builds them, with the settings every task uses.
CLIENT_FACTORY = "tasks/cluster_client.py"


def clients_built_in(source: str) -> list[str]:
    """Each construction of a Kafka client class in ``source`` (``KafkaAdapter(...)``, ``JavaAdmin(...)``)."""
    return [node.func.id for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in CLIENT_CLASSES]


def clients_built_outside_the_factory(root: Path = ROOT) -> dict[str, list[str]]:
    found = {}
    for package in ("controlplane", "groups", "tasks", "demo"):
        for path in sorted((root / package).rglob("*.py")):
            name = path.relative_to(root).as_posix()
            built = [] if name == CLIENT_FACTORY else clients_built_in(path.read_text())
            if built:
                found[name] = built
    return found


def test_a_cluster_s_kafka_clients_are_built_in_one_place():
    """Every task gets its Kafka clients from tasks/cluster_client.py (its
    timeouts and fan-out, secrets redacted from a short question's errors)."""
    assert clients_built_outside_the_factory() == {}, "build them with tasks.cluster_client"


def test_the_client_check_sees_a_client_built_elsewhere(tmp_path):
    for package in ("controlplane", "groups", "demo"):
        (tmp_path / package).mkdir()
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "poll.py").write_text("from adapters.kafka import KafkaAdapter\nKafkaAdapter(config, timeout=3)\n")
    (tmp_path / "tasks" / "cluster_client.py").write_text("KafkaAdapter(config)\nJavaAdmin(config)\n")
    assert clients_built_outside_the_factory(tmp_path) == {"tasks/poll.py": ["KafkaAdapter"]}
