"""Every module of the product imports on its own, and the import graph has no cycle.

A module that only imports because some other module happened to be imported first, or an
import cycle (even one hidden under `TYPE_CHECKING`, which still ties the two modules' meanings
together), is a layout bug that the suite would not otherwise see: tests import modules in one
order, a user's process in another.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("listener", "controller", "shared", "sandbox")


def _modules() -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def test_the_module_list_covers_every_package() -> None:
    modules = _modules()
    assert {m.split(".")[0] for m in modules} == set(PACKAGES)
    assert "controller.app" in modules
    assert "shared.typedefs" in modules


def _import_alone(modules: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "tests" / "import_alone.py"), *modules],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def test_every_module_imports_alone() -> None:
    result = _import_alone(_modules())
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_a_module_that_does_not_import_alone_is_named() -> None:
    result = _import_alone(["shared.typedefs", "shared.no_such_module"])
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "shared.no_such_module: ModuleNotFoundError: No module named 'shared.no_such_module'"
    ]


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module, or a module importing itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1 or module in graph.find_modules_directly_imported_by(module):
                found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_the_import_graph_has_no_cycle_even_under_type_checking() -> None:
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=False)
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for module in ("a", "a.x", "a.y", "a.z"):
        graph.add_module(module)
    graph.add_import(importer="a.x", imported="a.y")
    graph.add_import(importer="a.y", imported="a.x")
    graph.add_import(importer="a.z", imported="a.x")
    assert _cycles(graph) == [["a.x", "a.y"]]
