"""Shrunk length against the category's minimum, over a framework's corpus as committed.

    PYTHONPATH=$PWD .tox/adapter-langgraph/bin/python benchmarks/corpus_ratio.py langgraph \
        [--rev GIT_REV] [--list]

For every entry of ``corpus/<target>`` on a built-in store (``store-*`` variants and entries
fuzzed with ``--store`` are left out), its length divided by the minimum of its category for its
variant (``fuzz.minimize.category_minima``: what ``resumefuzz explore --target T --variant V``
prints) and by the *mechanism* minimum (the same, restricted to the kinds of operations the
entry uses; ``benchmarks/reminimize_corpus.py`` explains both).  ``--rev``: the entries as they
were at a git revision (to compare before and after a ``resumefuzz minimize --replace``);
``--list``: every entry above its variant minimum.  Entries recorded ``FIXED`` no longer diverge,
so nothing can shorten them: the *live* line leaves them out.  Runs nothing on the framework.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from fuzz.minimize import mechanism_caps
from fuzz.targets import prepare, resolve, select_variants
from fuzz.trace import parse_trace
from reminimize_corpus import minima_for  # the same minima, computed once per capability set


def entries(target: str, rev: str | None) -> list[tuple[str, dict]]:
    root = f"corpus/{target}"
    if rev is None:
        return [(str(p), json.loads(p.read_text())) for p in sorted(Path(root).rglob("*.json"))]
    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, root], check=True,
                           capture_output=True, text=True).stdout.split()
    return [(n, json.loads(subprocess.run(["git", "show", f"{rev}:{n}"], check=True,
                                          capture_output=True, text=True).stdout))
            for n in names if n.endswith(".json")]


def rows(adapter, found: list[tuple[str, dict]]) -> list[dict]:
    out = []
    for path, doc in found:
        variant_name = Path(path).parent.name
        if variant_name.startswith("store-") or "store-factory" in doc.get("versions", {}):
            continue
        trace = parse_trace(doc, path)
        if trace.finding is None:
            continue
        (variant,) = select_variants(adapter, [variant_name])
        caps = adapter.capabilities(variant)
        minimum = minima_for(caps).get(trace.finding.category)
        if not minimum:  # Unclassified, or Stuck without SIGKILL: no mutant, no minimum
            continue
        mechanism = minima_for(mechanism_caps(caps, trace.operations)).get(
            trace.finding.category, minimum)
        n = len(trace.operations)
        out.append({"path": path, "status": doc.get("status"), "length": n,
                    "minimum": minimum, "ratio": n / minimum, "mechanism": n / mechanism,
                    "ops": [op.name for op in trace.operations]})
    return out


def summary(rated: list[dict]) -> str:
    if not rated:
        return "no rated entries"
    ratio = [r["ratio"] for r in rated]
    mech = [r["mechanism"] for r in rated]
    return (f"{len(rated)} rated, mean length {statistics.mean(r['length'] for r in rated):.2f}; "
            f"vs variant minimum: median {statistics.median(ratio):.2f}, mean "
            f"{statistics.mean(ratio):.3f}; vs mechanism minimum: median "
            f"{statistics.median(mech):.2f}, mean {statistics.mean(mech):.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target")
    parser.add_argument("--rev", metavar="GIT_REV", help="the corpus as at this git revision")
    parser.add_argument("--list", action="store_true", help="every entry above its minimum")
    args = parser.parse_args()
    if not Path("corpus", args.target).is_dir():
        print(f"corpus_ratio: no corpus/{args.target} here (run it from the repository root)",
              file=sys.stderr)
        return 2
    rated = rows(prepare(resolve(args.target)), entries(args.target, args.rev))
    print(f"{args.target}{' at ' + args.rev if args.rev else ''}, all: {summary(rated)}")
    print(f"{args.target}{' at ' + args.rev if args.rev else ''}, live (not FIXED): "
          f"{summary([r for r in rated if r['status'] != 'FIXED'])}")
    if args.list:
        for r in sorted(rated, key=lambda r: -r["ratio"]):
            if r["ratio"] > 1:
                print(f"{r['ratio']:.2f} (mechanism {r['mechanism']:.2f}) {r['status']:6} "
                      f"{r['path']}: {', '.join(r['ops'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
