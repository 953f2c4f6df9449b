"""The architecture is checked, not only described: the import contracts in
pyproject.toml ([tool.importlinter]; see docs/ARCHITECTURE.md) must all hold.
Among them: imports run controlplane -> tasks -> groups, groups never imports
tasks, the pure domain imports no Django or Kafka, and no import circles."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("controlplane", "groups", "tasks", "demo")


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
        module.write("\nfrom tasks.jobs import run_remediation_job  # noqa: E402\n")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert "groups.services.dispatch -> tasks.jobs" in result.stdout
