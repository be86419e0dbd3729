"""Layer rules import-linter cannot express.

Writes: every INSERT, UPDATE and DELETE a test causes is checked at run time by tests/write_guard.py (the autouse
fixture `_writes_go_through_services` in tests/conftest.py): it must come from a services module (or one of the few
listed write modules), whatever the receiver is called — `Run.objects.update()`, `runs.update()`, `run.delete()`,
`run.save()`. The tests below show the guard catching each of those in a view and letting services and tests write.
Transactions: views, APIs and tasks never open one themselves (checked on their source).
"""

import ast
from pathlib import Path

import pytest

from tests.trajectories.factories import ingest, run_item
from tests.write_guard import ROOT, Violation, writes_recorded
from trajectories.models import Run

APPS = ["accounts", "trajectories", "llm", "graphs", "procedures", "intents", "reviews", "config", "otlp", "dashboard"]
THIN_MODULES = ("views.py", "api.py", "tasks.py")


def _thin_files():
    for app in APPS:
        for name in THIN_MODULES:
            path = ROOT / app / name
            if path.exists():
                yield path


def _transaction_imports(tree: ast.AST) -> list[int]:
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and node.module == "django.db"
        and any(alias.name == "transaction" for alias in node.names)
    ]


@pytest.mark.parametrize("path", list(_thin_files()), ids=lambda p: str(p.relative_to(ROOT)))
def test_thin_modules_open_no_transaction(path):
    offending = _transaction_imports(ast.parse(path.read_text()))
    assert not offending, f"{path.relative_to(ROOT)} imports django.db.transaction at lines {offending}; call a service"


# --- the write guard --------------------------------------------------------------------------------------------------


def code_in(relative: str, source: str, **names):
    """The functions of `source` compiled as if they were written in the project module `relative`: the guard sees
    their frames there, exactly as it would see that module's own code."""
    namespace = dict(names)
    exec(compile(source, str(ROOT / relative), "exec"), namespace)
    return namespace


def stored_run() -> Run:
    return Run.objects.get(pk=ingest(run_item()).created_ids[0])


VIEW_WRITES = """
def update_through_a_queryset(pk):
    runs = Run.objects.filter(pk=pk)
    runs.update(task="changed in a view")

def save_an_instance(pk):
    run = Run.objects.get(pk=pk)
    run.task = "saved in a view"
    run.save(update_fields=["task"])

def delete_an_instance(pk):
    Run.objects.get(pk=pk).delete()
"""


@pytest.mark.django_db
def test_a_queryset_update_in_a_view_fails_the_test(_writes_go_through_services):
    run = stored_run()
    view = code_in("trajectories/views.py", VIEW_WRITES, Run=Run)
    view["update_through_a_queryset"](run.pk)
    assert [(v.module, v.function) for v in _writes_go_through_services] == [
        ("trajectories/views.py", "update_through_a_queryset")
    ]
    assert _writes_go_through_services[0].statement.startswith('UPDATE "trajectories_run"')
    assert "trajectories/views.py:4 (update_through_a_queryset) writes outside services" in str(
        _writes_go_through_services[0]
    )
    _writes_go_through_services.clear()  # the deliberate violation must not fail this test


@pytest.mark.django_db
def test_save_and_delete_on_an_instance_in_a_view_are_caught_too(_writes_go_through_services):
    run = stored_run()
    view = code_in("graphs/api.py", VIEW_WRITES, Run=Run)
    view["save_an_instance"](run.pk)
    view["delete_an_instance"](run.pk)
    found = {(v.module, v.function, v.statement.split()[0]) for v in _writes_go_through_services}
    assert ("graphs/api.py", "save_an_instance", "UPDATE") in found
    assert ("graphs/api.py", "delete_an_instance", "DELETE") in found
    _writes_go_through_services.clear()


@pytest.mark.django_db
def test_the_same_writes_in_a_services_module_pass():
    run = stored_run()
    with writes_recorded() as violations:
        code_in("trajectories/services.py", VIEW_WRITES, Run=Run)["update_through_a_queryset"](run.pk)
        code_in("procedures/versions/services.py", VIEW_WRITES, Run=Run)["save_an_instance"](run.pk)
    assert violations == []
    assert Run.objects.get(pk=run.pk).task == "saved in a view"


@pytest.mark.django_db
def test_a_selector_or_a_command_that_writes_is_caught(_writes_go_through_services):
    run = stored_run()
    code_in("trajectories/selectors.py", VIEW_WRITES, Run=Run)["update_through_a_queryset"](run.pk)
    code_in("accounts/management/commands/seed_demo.py", VIEW_WRITES, Run=Run)["delete_an_instance"](run.pk)
    assert {v.module for v in _writes_go_through_services} == {  # a delete cascades: several statements
        "trajectories/selectors.py",
        "accounts/management/commands/seed_demo.py",
    }
    _writes_go_through_services.clear()


@pytest.mark.django_db
def test_tests_and_factories_write_directly_and_reads_are_not_checked():
    with writes_recorded() as violations:
        run = stored_run()  # ingest through the service, then a read
        Run.objects.filter(pk=run.pk).update(task="arranged by the test")
        code_in("trajectories/views.py", "def read(pk):\n    return Run.objects.get(pk=pk).task\n", Run=Run)["read"](
            run.pk
        )
    assert violations == []


WITH_WRITES = """
def update_in_a_with(pk):
    with connection.cursor() as cursor:
        cursor.execute(
            'WITH "changed" AS (UPDATE "trajectories_run" SET "task" = %s WHERE "id" = %s RETURNING "id") '
            'SELECT count(*) FROM "changed"',
            ["changed in a with", pk],
        )

def read_in_a_with(pk):
    with connection.cursor() as cursor:
        cursor.execute('WITH "one" AS (SELECT "task" FROM "trajectories_run" WHERE "id" = %s) TABLE "one"', [pk])
        return cursor.fetchone()[0]
"""


@pytest.mark.django_db
def test_a_with_statement_that_writes_is_checked_and_one_that_reads_is_not(_writes_go_through_services):
    from django.db import connection

    run = stored_run()
    view = code_in("graphs/views.py", WITH_WRITES, connection=connection)
    assert view["read_in_a_with"](run.pk) == run.task
    assert _writes_go_through_services == []
    view["update_in_a_with"](run.pk)
    assert [(v.module, v.function) for v in _writes_go_through_services] == [("graphs/views.py", "update_in_a_with")]
    _writes_go_through_services.clear()
    with writes_recorded() as violations:
        code_in("graphs/services.py", WITH_WRITES, connection=connection)["update_in_a_with"](run.pk)
    assert violations == [] and Run.objects.get(pk=run.pk).task == "changed in a with"


def test_a_violation_names_where_and_what():
    violation = Violation("reviews/views.py", 12, "approve", 'UPDATE "reviews_promotionrequest" SET …')
    assert str(violation).startswith("reviews/views.py:12 (approve) writes outside services: UPDATE")


def test_the_listed_write_modules_exist():
    from tests.write_guard import WRITE_MODULES

    assert [path for path in WRITE_MODULES if not Path(ROOT, path).exists()] == []


def test_no_test_module_imports_another_test_module():
    """Shared helpers live in tests/helpers/ (issue 28, item 9): no module under tests/ imports from a test module."""

    def is_test_module(name: str) -> bool:
        parts = name.split(".")
        return (
            parts[0] == "tests" and parts[-1].startswith("test_") and (ROOT / Path(*parts)).with_suffix(".py").exists()
        )

    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        package = list(path.relative_to(ROOT).with_suffix("").parts[:-1])
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                module = ".".join([*base, *([node.module] if node.module else [])])
                names = [module, *(f"{module}.{alias.name}" for alias in node.names)]
            else:
                continue
            found += [f"{path.relative_to(ROOT)}:{node.lineno} {name}" for name in names if is_test_module(name)]
    assert found == [], "import these from a module of tests/helpers/ instead"
