"""No import circle among the SQLite vector modules (matrix, list index, saved copy,
view, past vectors), counting the imports made only for type checking."""

from __future__ import annotations

import ast
from pathlib import Path

import erstwhile.store.sqlite as package

MODULES = ("vectors", "ann", "vector_file", "matrix_view", "past_vectors")


def imported(module: str) -> set[str]:
    """The modules of this package that ``module`` imports, anywhere in its source."""
    tree = ast.parse((Path(package.__file__).parent / f"{module}.py").read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "erstwhile.store.sqlite":
                found |= {alias.name for alias in node.names}
            elif node.module.startswith("erstwhile.store.sqlite."):
                found.add(node.module.rsplit(".", 1)[1])
        elif isinstance(node, ast.Import):
            found |= {
                alias.name.rsplit(".", 1)[1]
                for alias in node.names
                if alias.name.startswith("erstwhile.store.sqlite.")
            }
    return found & set(MODULES)


def test_no_import_circle_among_the_vector_modules() -> None:
    edges = {module: imported(module) for module in MODULES}

    def reaches(start: str, goal: str, seen: frozenset[str] = frozenset()) -> bool:
        return any(
            step == goal or (step not in seen and reaches(step, goal, seen | {step}))
            for step in edges[start]
        )

    assert [module for module in MODULES if reaches(module, module)] == []
