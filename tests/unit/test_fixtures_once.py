"""Each fixture under tests/ is defined once (issue 45): a second definition
of a name, even one that overrides the first for a module, is a second home
for the same thing, and which one a test gets depends on where it lives."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _is_fixture(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Attribute) and target.attr == "fixture" or (
        isinstance(target, ast.Name) and target.id == "fixture")


def fixtures_defined() -> dict[str, list[str]]:
    """Fixture name -> where it is defined (``path:line``), for every module under tests/."""
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(map(_is_fixture, node.decorator_list)):
                where[node.name].append(f"{path.relative_to(TESTS.parent)}:{node.lineno}")
    return where


def test_it_finds_the_fixtures_of_the_conftests():
    where = fixtures_defined()
    assert [place.split(":")[0] for place in where["broker"]] == ["tests/conftest.py"]
    assert [place.split(":")[0] for place in where["spark"]] == ["tests/integration/conftest.py"]


def test_each_fixture_is_defined_once():
    twice = {name: places for name, places in fixtures_defined().items() if len(places) > 1}
    assert twice == {}, f"fixtures defined more than once (move each to the nearest shared conftest): {twice}"
