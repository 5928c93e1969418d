"""Lines of code per area and the largest functions: what a maintainer carries.

    python benchmarks/code_size.py [--top N] [--json]

Areas (non-blank, non-comment lines of ``.py`` files; docstrings count, as a reader reads them):
the oracle (``refmodel/``), the engine (``fuzz/`` but its reproduction checker), the reproduction
layer (``adapters/reproduction/``, or ``adapters/toolkit/`` in older checkouts, every
adapter's ``repro*.py`` and ``fuzz/reprocheck.py``), the rest of the adapters, the embedding API
(``resumefuzz/``) and the tests.  Run it on two checkouts to compare (``git worktree add``).
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def area(path: Path) -> str:
    rel = path.relative_to(ROOT).as_posix()
    top = rel.split("/")[0]
    if rel.startswith(("adapters/reproduction/", "adapters/toolkit/")) or \
            rel == "fuzz/reprocheck.py" or (top == "adapters" and path.name.startswith("repro")):
        return "reproduction"
    return {"refmodel": "oracle", "fuzz": "engine", "adapters": "adapters (other)",
            "resumefuzz": "embedding API", "tests": "tests"}.get(top, "")


def code_lines(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip() and not line.strip().startswith("#"))


def functions(path: Path):
    """``(lines, qualified name)`` of every function in ``path``, nested ones apart."""
    tree = ast.parse(path.read_text(), str(path))
    rel = path.relative_to(ROOT).as_posix()

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield child.end_lineno - child.lineno + 1, f"{rel}:{prefix}{child.name}"
                yield from walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")

    yield from walk(tree, "")


def measure(top: int) -> dict:
    areas, largest = {}, []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).parts
        if rel[0].startswith(".") or rel[0] in ("benchmarks", "conformance", "build"):
            continue
        name = area(path)
        if not name:
            continue
        areas[name] = areas.get(name, 0) + code_lines(path.read_text())
        if name != "tests":
            largest.extend(functions(path))
    largest.sort(reverse=True)
    return {"areas": areas, "largest": [{"lines": n, "function": f} for n, f in largest[:top]]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=10, help="largest functions to list (10)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.top < 0:
        parser.error("--top must be 0 or more")
    result = measure(args.top)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print("| area | lines |\n|---|---:|")
    for name, n in sorted(result["areas"].items(), key=lambda kv: -kv[1]):
        print(f"| {name} | {n:,} |")
    print("\n| function | lines |\n|---|---:|")
    for row in result["largest"]:
        print(f"| `{row['function']}` | {row['lines']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
