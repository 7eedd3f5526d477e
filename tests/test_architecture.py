"""The package's shape, checked: one-way layers, no import cycles, small modules.

The layers are declared once, in ``pyproject.toml`` (``[tool.importlinter]``), and drawn in
``docs/architecture.md``. ``lint-imports`` (import-linter) checks them on the command line; these
tests run the same check in the suite, plus what a layers contract cannot see: cycles inside a
layer, imports of the package's public facade from inside the package, and module size.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "agent_rl_plugin"
MAX_LINES = 600


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    # Every import counts, those inside functions too: a cycle dodged by a late import is a cycle.
    return grimp.build_graph("agent_rl_plugin", exclude_type_checking_imports=True, cache_dir=None)


def test_the_layers_contract_holds() -> None:
    # In a child process: import-linter configures logging, which would silence this process's
    # loggers for the tests that run after this one.
    result = subprocess.run(
        [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports; "
         f"sys.exit(lint_imports(config_filename={str(ROOT / 'pyproject.toml')!r}, no_cache=True))"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )
    assert result.returncode == 0, (
        "a module imports a layer above its own (see docs/architecture.md for the layers):\n"
        + result.stdout[-4000:] + result.stderr[-2000:]
    )


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_imports_itself_through_others(graph: grimp.ImportGraph) -> None:
    # The package root re-exports the public API lazily and is imported by nothing inside, so it
    # is left out; everything else must form no cycle, not even inside one layer.
    cycles = _cycles(graph)
    assert cycles == [], "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_finder_sees_a_cycle() -> None:
    # The check above must be able to fail: two modules importing each other form one cycle.
    g = grimp.ImportGraph()
    for name in ("pkg", "pkg.a", "pkg.b", "pkg.c"):
        g.add_module(name)
    g.add_import(importer="pkg.a", imported="pkg.b")
    g.add_import(importer="pkg.b", imported="pkg.a")
    g.add_import(importer="pkg.c", imported="pkg.a")
    assert _cycles(g) == [["pkg.a", "pkg.b"]]


def test_nothing_inside_imports_the_public_facade(graph: grimp.ImportGraph) -> None:
    # `agent_rl_plugin/__init__.py` is the facade users import; modules inside import the layer
    # that defines a name (the version lives in agent_rl_plugin.version).
    importers = sorted(
        m for m in graph.find_modules_that_directly_import("agent_rl_plugin") if m != "agent_rl_plugin"
    )
    assert importers == [], f"these modules import the package root: {importers}"


def _module_lines() -> dict[str, int]:
    return {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def test_no_module_is_over_600_lines() -> None:
    too_long = {name: n for name, n in _module_lines().items() if n > MAX_LINES}
    assert too_long == {}, f"modules over {MAX_LINES} lines (split them by job): {too_long}"


def test_recording_modules_declare_their_layer_in_the_contract() -> None:
    # Every top-level module or package of agent_rl_plugin is named in a layer, so a new one
    # cannot slip outside the contract. __init__ (the facade) and __main__ are the entry points.
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    tree_names = {
        p.stem if p.is_file() else p.name
        for p in PACKAGE.iterdir()
        if (p.is_file() and p.suffix == ".py") or (p.is_dir() and (p / "__init__.py").exists())
    } - {"__init__", "__main__"}
    start = text.index("[[tool.importlinter.contracts]]")
    layers_block = text[text.index("layers = [", start) : text.index("]", text.index("layers = [", start))]
    named = set()
    for line in layers_block.splitlines()[1:]:
        line = line.strip().strip(",").strip('"')
        for part in line.replace("|", ":").split(":"):
            part = part.strip().strip("()")
            if part:
                named.add(part)
    assert tree_names - named == set(), f"not in any layer of pyproject.toml: {sorted(tree_names - named)}"
    assert named - tree_names == set(), f"layers name modules that do not exist: {sorted(named - tree_names)}"


def test_package_parses_with_the_oldest_supported_python_grammar() -> None:
    # requires-python is >=3.11: no syntax newer than that (PEP 695 generics, PEP 701 f-strings).
    for path in PACKAGE.rglob("*.py"):
        ast.parse(path.read_text(encoding="utf-8"), filename=str(path), feature_version=(3, 11))
    assert sys.version_info >= (3, 11)
