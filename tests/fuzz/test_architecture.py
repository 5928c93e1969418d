"""ARCHITECTURE.md's rules about imports, checked on the source (nothing is imported).

Every import counts, a deferred one inside a function included: a deferred import hides a cycle
from the interpreter's start-up, not from a reader, who still has to hold both modules in mind to
change either.  The rules: no import cycles; ``refmodel/`` imports nothing of ours; an adapter
imports ``adapters``' shared modules, ``refmodel`` and its own package, never another adapter nor
the engine; the engine (``fuzz/``) reaches a framework adapter only through the registry, never
by importing its package.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("refmodel", "fuzz", "adapters", "resumefuzz")
FRAMEWORK_PACKAGES = ("langgraph", "crewai", "llamaindex", "pydantic_graph", "autogen")


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of our packages."""
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _imports(name: str, path: Path, modules: dict) -> set[str]:
    """The modules of ours that ``name`` imports anywhere in its file."""
    is_package = path.name == "__init__.py"
    here = name if is_package else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            # ``from pkg import sub`` imports the submodule ``pkg.sub`` when there is one.
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                       for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:  # ``import a.b.c`` of a name inside a.b
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
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
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_finder_sees_a_deferred_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_refmodel_imports_nothing_of_ours():
    graph = _graph()
    leaks = {m: sorted(t for t in targets if not t.startswith("refmodel"))
             for m, targets in graph.items() if m.startswith("refmodel")}
    assert {m: t for m, t in leaks.items() if t} == {}


def _framework(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "adapters" and \
        parts[1] in FRAMEWORK_PACKAGES else None


def test_an_adapter_imports_no_other_adapter_and_not_the_engine():
    bad = {}
    for module, targets in _graph().items():
        mine = _framework(module)
        if mine is None:
            continue
        wrong = sorted(t for t in targets if t.split(".")[0] in ("fuzz", "resumefuzz")
                       or _framework(t) not in (None, mine))
        if wrong:
            bad[module] = wrong
    assert bad == {}


def test_the_engine_imports_no_framework_adapter():
    bad = {m: sorted(t for t in targets if _framework(t))
           for m, targets in _graph().items() if m.split(".")[0] in ("fuzz", "refmodel")}
    assert {m: t for m, t in bad.items() if t} == {}
