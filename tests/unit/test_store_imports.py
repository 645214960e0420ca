"""The store has no import circle, and the unit of work's value (``store.unit``: ``Work`` and
its applier) imports nothing that imports it, nor what reads for a follow-up: ``Work.apply``
notes the owners it touched and calls nothing back. The worklist is drained in the open by
the use cases (``app.follow_ups``): no store module drains it (nor imports ``herder.app``,
which ``test_layers`` holds). Read from the source with ``ast``: typing-only imports count
too."""

from __future__ import annotations

import ast
from pathlib import Path

import herder.store

STORE = Path(herder.store.__file__).parent
PACKAGE = "herder.store"


def _module_name(path: Path) -> str:
    parts = path.relative_to(STORE).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((PACKAGE, *parts))


def _imported(path: Path, module: str, known: set[str]) -> set[str]:
    """The store modules this one imports (``from herder.store.x import y`` names module
    ``herder.store.x.y`` when that is a module, else ``herder.store.x``)."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for name in names:
            if name in known and name != module:
                found.add(name)
    return {name for name in found if not any(other.startswith(name + ".") for other in found)}


def import_graph(root: Path = STORE) -> dict[str, set[str]]:
    paths = {_module_name(path): path for path in root.rglob("*.py")}
    known = set(paths)
    return {module: _imported(path, module, known) for module, path in paths.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected component of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for child in sorted(graph.get(node, ())):
            if child not in index:
                visit(child)
                low[node] = min(low[node], low[child])
            elif child in on_stack:
                low[node] = min(low[node], index[child])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def reaching(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for child in graph.get(todo.pop(), ()):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return seen


def test_the_store_has_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


def test_the_unit_of_work_imports_nothing_that_imports_it() -> None:
    graph = import_graph()
    work = f"{PACKAGE}.unit"
    above = sorted(module for module in reaching(graph, work) if work in reaching(graph, module))
    assert above == []


def test_the_applier_reaches_nothing_that_follows_an_end() -> None:
    reached = reaching(import_graph(), f"{PACKAGE}.unit")
    following = {f"{PACKAGE}.workflows.progress", f"{PACKAGE}.backfill_steps"}
    assert reached & following == set()


DRAIN = ("follow_up", "advance_run", "admit_next", "step_backfill")  # app.follow_ups'


def drains(source: str) -> list[str]:
    """Each definition or call of the drain's steps in ``source``, by line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name in DRAIN:
            found.append(f"line {node.lineno}: defines {node.name}")
        elif isinstance(node, ast.Call):
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name in DRAIN:
                found.append(f"line {node.lineno}: calls {name}")
    return found


def test_no_store_module_drains_the_worklist() -> None:
    found = [
        f"{_module_name(path)} {use}"
        for path in sorted(STORE.rglob("*.py"))
        for use in drains(path.read_text())
    ]
    assert found == []


def test_the_check_sees_a_store_module_that_drains() -> None:
    assert drains("def step_backfill(work, backfill_id): ...")
    assert drains("def end(work):\n    work.apply(changes)\n    follow_up(work)")


def test_the_check_sees_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert reaching(graph, "d") == {"a", "b", "c"}


ABOVE_THE_STORE = (
    "herder.api",
    "herder.app",
    "herder.control",
    "herder.cli",
    "herder.worker",
)


def test_no_store_module_imports_a_layer_above_the_store() -> None:
    found = []
    for path in STORE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            found += [
                f"{_module_name(path)} imports {name}"
                for name in names
                if name.startswith(ABOVE_THE_STORE)
            ]
    assert found == []
