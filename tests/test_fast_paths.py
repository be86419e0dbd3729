"""HTML built in Python stays in the modules docs/architecture.md lists ("Fast paths"): `mark_safe` anywhere else fails
here, so a new shortcut around autoescaping is either listed (and reviewed as one) or written as a template."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIPPED = {".venv", "var", "tests", "bench", "node_modules", ".git", "static"}
CALL = re.compile(r"\bmark_safe\b")


def listed_modules() -> set[str]:
    """The modules of the table under "HTML built in Python" in docs/architecture.md's "Fast paths"."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## Fast paths", 1)[1].split("\n## ", 1)[0]
    table = section.split("only these modules may call `mark_safe`", 1)[1]
    return set(re.findall(r"^\| `([\w/]+\.py)` \|", table, flags=re.MULTILINE))


def modules_calling_mark_safe() -> set[str]:
    found = set()
    for path in ROOT.rglob("*.py"):
        relative = path.relative_to(ROOT)
        if relative.parts[0] in SKIPPED or "migrations" in relative.parts:
            continue
        if CALL.search(path.read_text()):
            found.add(relative.as_posix())
    return found


def test_mark_safe_only_in_the_listed_modules():
    listed = listed_modules()
    assert listed, "the Fast paths table in docs/architecture.md names no module"
    unlisted = modules_calling_mark_safe() - listed
    assert not unlisted, f"mark_safe outside the modules docs/architecture.md lists: {sorted(unlisted)}"


def test_every_listed_module_exists_and_still_needs_its_entry():
    """A stale row is a false claim: each listed module exists and calls mark_safe."""
    calling = modules_calling_mark_safe()
    for module in listed_modules():
        assert (ROOT / module).is_file(), f"{module} is listed but does not exist"
        assert module in calling, f"{module} is listed but no longer calls mark_safe: remove its row"


def test_the_table_is_read_as_written():
    """The reader itself: a module named only in the other table is not an allowance."""
    listed = listed_modules()
    assert "dashboard/tables.py" in listed
    assert "common/plain_models.py" not in listed
