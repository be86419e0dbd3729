"""The client is a package of its own: it depends on httpx2 alone and never imports Django or Waymark's code."""

import ast
import sys
import tomllib
from pathlib import Path

import pytest

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "python"
SOURCES = sorted((CLIENT / "src" / "waymark_client").glob("*.py"))


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_the_client_imports_only_the_standard_library_and_httpx2(path):
    outside = imported_roots(path) - set(sys.stdlib_module_names) - {"httpx2", "waymark_client"}
    assert not outside, f"{path.name} imports {sorted(outside)}"


def test_the_package_declares_httpx2_as_its_only_dependency():
    project = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "waymark-client"
    assert [dependency.split(">")[0] for dependency in project["dependencies"]] == ["httpx2"]
    assert len(SOURCES) >= 5 and (CLIENT / "src" / "waymark_client" / "py.typed").exists()
