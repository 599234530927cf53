"""The package's modules import each other without a circle.

The graph is built from the source with :mod:`ast`, not by importing anything. An edge
``a -> b`` is an import of ``b`` written at ``a``'s module level, including one under
``if TYPE_CHECKING:`` (a type-only import is still a dependency between the two
modules, and a circle through one is as hard to take apart); ``from p import n`` is an
edge to ``p.n`` where that is a module, else to ``p``. Imports inside a function or
method are not edges: they run at call time, long after both modules are loaded, and
exist to defer a heavy or optional import (the REST client, a backend's driver). A
package's ``__init__`` is not an implicit edge of its submodules' imports (Python runs
it first, before either module's body).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import erstwhile

PACKAGE = Path(erstwhile.__file__).parent


def modules(root: Path) -> dict[str, Path]:
    """Every module under ``root`` (a package directory) by its dotted name."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements that run when the module is imported (or are read by a type
    checker: ``if TYPE_CHECKING:``), through ``if`` and ``try`` but into no ``def`` or
    ``class``."""
    for node in body:
        if isinstance(node, ast.If):
            yield from _module_level(node.body)
            yield from _module_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                yield from _module_level(block)
            for handler in node.handlers:
                yield from _module_level(handler.body)
        else:
            yield node


def import_graph(root: Path) -> dict[str, set[str]]:
    """Each module's module-level imports of the package's own modules."""
    known = modules(root)
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _module_level(ast.parse(path.read_text(), str(path)).body):
            if isinstance(node, ast.Import):
                graph[name].update(a.name for a in node.names if a.name in known)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - node.level + 1]
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                for alias in node.names:
                    target = f"{base}.{alias.name}"
                    if target in known:
                        graph[name].add(target)
                    elif base in known:
                        graph[name].add(base)
    return graph


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The graph's strongly connected components of more than one module (Tarjan's,
    without recursion), and any module that imports itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1 or node in graph[node]:
                        found.append(component)
    return found


def test_the_package_has_no_import_circle() -> None:
    found = circles(import_graph(PACKAGE))
    assert found == [], f"import circles: {[sorted(c) for c in found]}"


def test_the_search_finds_circles_through_type_checking_and_from_imports(
    tmp_path: Path,
) -> None:
    """The graph and the search on a package made for it: a circle through an ``if
    TYPE_CHECKING:`` import and a ``from package import module``, one through a
    relative import, and an import inside a function, which is not one."""
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n",
        "b.py": "from pkg import c\n",
        "c.py": "import pkg.a\n",
        "sub/__init__.py": "",
        "sub/x.py": "from . import y\n",
        "sub/y.py": "from .x import X\n",
        "d.py": "def f():\n    from pkg import e\n",
        "e.py": "from pkg import d\n",
    }
    for name, text in files.items():
        (root / name).write_text(text)
    graph = import_graph(root)
    assert graph["pkg.e"] == {"pkg.d"} and graph["pkg.d"] == set()
    assert sorted(map(sorted, circles(graph))) == [
        ["pkg.a", "pkg.b", "pkg.c"],
        ["pkg.sub.x", "pkg.sub.y"],
    ]
