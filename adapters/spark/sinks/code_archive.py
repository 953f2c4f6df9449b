"""The code a Spark Connect session's Python workers need for the handler
sink, shipped to the session as an artifact."""

from __future__ import annotations

from pathlib import Path

PROJECT = Path(__file__).resolve().parents[3]
# What the handler sink's Python workers import: the Spark job's package (the
# function mapInArrow runs is pickled by reference to
# adapters.spark.sinks.handler_call) and the pure modules it imports.
JOB_PACKAGES = ("adapters/spark", "groups/domain")


def code_archive(handler: str, folder: Path) -> Path:
    """A zip of JOB_PACKAGES and, when it lives in this project, the
    handler's module (with the ``__init__.py`` of its packages), for a Spark Connect session's Python
    workers (``addArtifacts(pyfile=True)``): executors on a cluster have
    neither. A handler installed elsewhere must be installed on the
    cluster's Python too."""
    import importlib.util
    import zipfile

    roots = [PROJECT / package for package in JOB_PACKAGES]
    module = handler.partition(":")[0] if ":" in handler else handler.rpartition(".")[0]
    found = importlib.util.find_spec(module)
    origin = Path(found.origin).resolve() if found and found.origin else None
    if origin and PROJECT in origin.parents:
        roots.append(origin.parent if origin.name == "__init__.py" else origin)
    archive = folder / "gapwatch-job-code.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        for root in roots:
            files = [root] if root.is_file() else sorted(root.rglob("*.py"))
            for file in files:
                bundle.write(file, file.relative_to(PROJECT))
            # Every package on the way down needs its __init__.py.
            for parent in (root if root.is_dir() else root.parent, *(root if root.is_dir() else root.parent).parents):
                if parent == PROJECT or PROJECT not in parent.parents:
                    break
                init = parent / "__init__.py"
                if init.exists() and str(init.relative_to(PROJECT)) not in bundle.namelist():
                    bundle.write(init, init.relative_to(PROJECT))
    return archive
