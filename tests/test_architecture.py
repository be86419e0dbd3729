"""Layer rules import-linter cannot express: views, APIs and tasks never write through the ORM themselves."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APPS = ["accounts", "trajectories", "llm", "graphs", "procedures", "intents", "reviews", "config", "otlp"]
WRITE_METHODS = {
    "save",
    "create",
    "bulk_create",
    "update",
    "bulk_update",
    "delete",
    "get_or_create",
    "update_or_create",
}
THIN_MODULES = ("views.py", "api.py", "tasks.py")


def _thin_files():
    for app in APPS:
        for name in THIN_MODULES:
            path = ROOT / app / name
            if path.exists():
                yield path


def _orm_writes(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WRITE_METHODS:
            target = node.func.value
            # Model.objects.create(...), qs.update(...), obj.save(): an ORM write unless it is a dict/set method.
            text = ast.unparse(target)
            if ".objects" in text or node.func.attr in {"save", "bulk_create", "bulk_update"}:
                lines.append(node.lineno)
        if (
            isinstance(node, ast.ImportFrom)
            and node.module == "django.db"
            and any(a.name == "transaction" for a in node.names)
        ):
            lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("path", list(_thin_files()), ids=lambda p: str(p.relative_to(ROOT)))
def test_thin_modules_leave_writes_to_services(path):
    offending = _orm_writes(ast.parse(path.read_text()))
    assert not offending, f"{path.relative_to(ROOT)} writes through the ORM at lines {offending}; call a service"
