"""The import graph of Chorus's apps, module-level and function-level imports together, has no cycle
but the Celery task <-> service pairs (a task imports its service inside the function, the service
enqueues the task): issue 23's plan, kept true by this test."""

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APPS = ("annotation", "audits", "config")


def _modules() -> dict[str, Path]:
    modules = {}
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            rel = path.relative_to(ROOT)
            if "migrations" in rel.parts:
                continue
            name = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
            modules[name] = path
    return modules


def _graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            else:
                continue
            for target in targets:
                resolved = known(target)
                if resolved and resolved != name:
                    graph[name].add(resolved)
        # Importing a module runs its packages' __init__ first (except the importer's own packages).
        for target in list(graph[name]):
            parts = target.split(".")
            for i in range(1, len(parts)):
                ancestor = ".".join(parts[:i])
                if ancestor in modules and not name.startswith(ancestor + "."):
                    graph[name].add(ancestor)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    sys.setrecursionlimit(10_000)
    index, low, stack, on_stack, components, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return components


def test_the_only_import_cycles_are_celery_tasks_and_their_services():
    for component in _cycles(_graph(_modules())):
        tasks = [m for m in component if m.endswith(".tasks")]
        others = [m for m in component if not m.endswith(".tasks") and ".services" not in m]
        assert tasks and not others, f"an import cycle that is not a task <-> service pair: {component}"


def test_the_checker_sees_a_cycle():
    graph = {"a.services": {"a.selectors"}, "a.selectors": {"a.services"}, "a.tasks": set()}
    assert _cycles(graph) == [["a.selectors", "a.services"]]
