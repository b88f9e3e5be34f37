"""The annotation app enters the audit through one door: ``audits.hook`` (and the engine, a library).

Every module of ``annotation/`` is parsed, and every import in it is read, at module level and inside
functions alike (a function-level import is as much a door as one at the top), as the engine's
isolation test (``tests/audits/test_engine_isolation.py``) guards the engine against Django.
Parsing rather than importing: what the test run has imported already cannot hide an edge.
"""

from __future__ import annotations

import ast
from pathlib import Path

import audits.engine

REPO = Path(__file__).resolve().parents[2]
ALLOWED = ("audits.hook", "audits.engine")


def audits_imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every import of an ``audits`` module in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "audits":
                # "from audits import X": X is a submodule, or one of the engine's names re-exported lazily.
                found += [
                    (node.lineno, "audits.engine" if alias.name in audits.engine.__all__ else f"audits.{alias.name}")
                    for alias in node.names
                ]
            else:
                found.append((node.lineno, node.module))
    return [(line, module) for line, module in found if module == "audits" or module.startswith("audits.")]


def allowed(module: str) -> bool:
    return any(module == door or module.startswith(door + ".") for door in ALLOWED)


def test_annotation_imports_only_the_hook_and_the_engine_of_audits():
    crossings = {
        f"{path.relative_to(REPO)}:{line}": module
        for path in sorted((REPO / "annotation").rglob("*.py"))
        for line, module in audits_imports(path)
    }
    assert any(module == "audits.hook" for module in crossings.values()), "the walk found no import of the hook"
    wrong = {where: module for where, module in crossings.items() if not allowed(module)}
    assert wrong == {}, "annotation may import only audits.hook and audits.engine of the audits app"


def test_the_check_sees_function_level_imports(tmp_path):
    source = tmp_path / "module.py"
    source.write_text(
        "from audits.hook import label_stats_add\n"
        "def act():\n"
        "    from audits.services.runs import audit_refresh\n"
        "    from audits import selectors, noise_audit\n"
        "    import audits.models\n"
    )
    modules = [module for _, module in audits_imports(source)]
    assert modules == ["audits.hook", "audits.services.runs", "audits.selectors", "audits.engine", "audits.models"]
    assert [allowed(m) for m in modules] == [True, False, False, True, False]
