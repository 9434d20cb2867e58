"""The package's imports run one way: down the layers written in `callboard`'s docstring.

The walk reads every module's source (imports inside functions and under
``TYPE_CHECKING`` count too), resolves each import to a callboard module,
and checks two things: no module imports a higher layer than its own, and
the import graph has no cycle between layers. Within a layer, a package
may import its own modules in any order except in a circle through the
top-level package (``callboard`` itself re-exports every layer, so nothing
below may import it).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import callboard

ROOT = Path(callboard.__file__).parent


def layers() -> list[str]:
    """The layer names, bottom up, as the docstring lists them (``- ``name``: ...``)."""
    doc = callboard.__doc__ or ""
    return re.findall(r"^- ``([\w.]+)``:", doc, flags=re.MULTILINE)


def module_name(path: Path) -> str:
    parts = ["callboard", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in ROOT.rglob("*.py")}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The callboard modules ``name`` imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("callboard"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if not target.startswith("callboard"):
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in known else target)
    return {m for m in found if m in known and m != name}


def layer_of(name: str, order: list[str]) -> int | None:
    """The index of the layer ``name`` belongs to; None for the top package."""
    if name == "callboard":
        return None
    top = name.split(".")[1]
    if top == "__main__":
        return len(order)
    assert top in order, f"{name} belongs to no layer of callboard's docstring: add {top!r}"
    return order.index(top)


def test_the_docstring_lists_every_layer_once() -> None:
    order = layers()
    assert len(order) == len(set(order)) >= 10
    tops = {name.split(".")[1] for name in modules() if name != "callboard"} - {"__main__"}
    assert tops == set(order)


def test_no_module_imports_a_higher_layer_or_the_top_package() -> None:
    order = layers()
    known = set(modules())
    wrong = []
    for name, path in sorted(modules().items()):
        mine = layer_of(name, order)
        if mine is None:
            continue  # the top package re-exports every layer
        for target in sorted(imports_of(name, path, known)):
            theirs = layer_of(target, order)
            if theirs is None or theirs > mine:
                wrong.append(f"{name} imports {target}")
    assert wrong == []


def test_the_layers_import_graph_has_no_cycle() -> None:
    known = set(modules())
    graph: dict[str, set[str]] = {}
    for name, path in modules().items():
        if name == "callboard":
            continue
        mine = name.split(".")[1]
        for target in imports_of(name, path, known):
            theirs = target.split(".")[1] if target != "callboard" else "callboard"
            if theirs != mine:
                graph.setdefault(mine, set()).add(theirs)
    seen: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(node: str, path: list[str]) -> None:
        seen[node] = 1
        for nxt in sorted(graph.get(node, ())):
            assert seen.get(nxt) != 1, f"import cycle: {' -> '.join([*path, node, nxt])}"
            if nxt not in seen:
                visit(nxt, [*path, node])
        seen[node] = 2

    for node in sorted(graph):
        if node not in seen:
            visit(node, [])


def test_the_walk_sees_imports_inside_functions(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text("def f():\n    from ..runtime import Runtime\n")
    found = imports_of("callboard.store.probe", source, {"callboard.runtime"})
    assert found == {"callboard.runtime"}
