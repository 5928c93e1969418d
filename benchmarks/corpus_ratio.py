"""Shrunk length against the category's minimum, over a framework's corpus as committed.

    PYTHONPATH=$PWD .tox/adapter-langgraph/bin/python benchmarks/corpus_ratio.py langgraph \
        [--rev GIT_REV] [--list] [--probe] [--json]
    PYTHONPATH=$PWD:$PWD/benchmarks .tox/core/bin/python benchmarks/corpus_ratio.py --all

For every entry of ``corpus/<target>`` on a built-in store (``store-*`` variants and entries
fuzzed with ``--store`` are left out), its length divided by the minimum of its category for its
variant (``fuzz.minimize.category_minima``: what ``resumefuzz explore --target T --variant V``
prints) and by the *mechanism* minimum (the same, restricted to the kinds of operations the
entry uses, and never below the fewest operations a trace through the entry's route can have;
``benchmarks/reminimize_corpus.py`` explains both).  ``--rev``: the entries as they were at a
git revision (to compare before and after a ``resumefuzz minimize --replace``); ``--list``:
every entry above its variant minimum.  Entries recorded ``FIXED`` no longer diverge, so nothing
can shorten them: the *live* line leaves them out.  Runs nothing on the framework, except with
``--probe``: each live entry above its mechanism minimum is measured on the target, every
shorter trace through its route (``reminimize_corpus.route_traces``) run once; when none of
them diverges alike (category, property, verdict), the route's minimum on that variant is the
entry's own length (the *probed* line).  A free race is not probed (one run decides nothing).
``--json``: the rated entries as a JSON list (no probing).  ``--all``: runs ``--json`` for each
framework in its ``.tox/adapter-<target>`` environment (built with ``tox run -e ... --notest``)
and prints each framework's line and the whole framework corpus's (issue 16 states its goal over
"the committed framework corpus": median 1.0, mean <= 1.2 against the variant minimum).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from fuzz.minimize import session_judge, timing_dependent
from fuzz.targets import prepare, resolve, select_variants
from fuzz.trace import parse_trace
from reminimize_corpus import mechanism_minimum, minima_for, route_traces


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
        mechanism = mechanism_minimum(caps, trace)
        n = len(trace.operations)
        out.append({"path": path, "status": doc.get("status"), "length": n,
                    "minimum": minimum, "ratio": n / minimum, "mechanism": n / mechanism,
                    "mechanism_minimum": mechanism, "ops": [op.name for op in trace.operations],
                    "trace": trace, "variant": variant, "caps": caps})
    return out


def probe(adapter, rated: list[dict]) -> None:
    """Add ``probed`` (the route's minimum measured on the target) and ``tried`` to each live
    row above its mechanism minimum (``--probe``; module docstring)."""
    from fuzz.runner import Session, Settings

    sessions: dict = {}
    try:
        for row in rated:
            trace, low = row["trace"], row["mechanism_minimum"]
            if row["status"] == "FIXED" or row["length"] <= low or timing_dependent(trace):
                continue
            if row["variant"].name not in sessions:
                sessions[row["variant"].name] = Session(adapter, row["variant"],
                                                        settings=Settings())
            judge = session_judge(sessions[row["variant"].name])
            goal = (trace.finding.category, trace.finding.property, trace.finding.verdict)
            row["probed"], row["tried"] = row["length"], 0
            for length in range(low, row["length"]):
                for workflow, ops in route_traces(trace, row["caps"], length):
                    row["tried"] += 1
                    judged = judge(trace.with_(workflow=workflow, operations=ops))
                    if judged is not None and judged.key == goal:
                        row["probed"] = length
                        break
                if row["probed"] < row["length"]:
                    break
            print(f"probed {row['path']}: {row['tried']} shorter traces run, route minimum "
                  f"{row['probed']}", file=sys.stderr)
    finally:
        for session in sessions.values():
            session.close()


def summary(rated: list[dict], key: str = "mechanism") -> str:
    if not rated:
        return "no rated entries"
    ratio = [r["ratio"] for r in rated]
    mech = [r[key] for r in rated]
    return (f"{len(rated)} rated, mean length {statistics.mean(r['length'] for r in rated):.2f}; "
            f"vs variant minimum: median {statistics.median(ratio):.2f}, mean "
            f"{statistics.mean(ratio):.3f}; vs mechanism minimum: median "
            f"{statistics.median(mech):.2f}, mean {statistics.mean(mech):.3f}")


FRAMEWORKS = ("autogen", "crewai", "langgraph", "llamaindex", "pydantic-graph")


def run_all() -> int:
    """``--all``: every framework's rated entries, from its own environment, then the whole."""
    root = Path(__file__).resolve().parent.parent
    every: list[dict] = []
    for target in FRAMEWORKS:
        python = root / ".tox" / f"adapter-{target}" / "bin" / "python"
        if not python.exists():
            print(f"corpus_ratio: no {python} (tox run -e adapter-{target} --notest)",
                  file=sys.stderr)
            return 2
        env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{root / 'benchmarks'}"}
        out = subprocess.run([str(python), __file__, target, "--json"], cwd=root, env=env,
                             check=True, capture_output=True, text=True).stdout
        rated = json.loads(out)
        every += rated
        live = [r for r in rated if r["status"] != "FIXED"]
        print(f"{target}, all: {summary(rated)}")
        print(f"{target}, live (not FIXED): {summary(live)}")
    print(f"all frameworks, all: {summary(every)}")
    print(f"all frameworks, live (not FIXED): "
          f"{summary([r for r in every if r['status'] != 'FIXED'])}")
    return 0


def main() -> int:
    if sys.argv[1:] == ["--all"]:
        return run_all()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target")
    parser.add_argument("--rev", metavar="GIT_REV", help="the corpus as at this git revision")
    parser.add_argument("--list", action="store_true", help="every entry above its minimum")
    parser.add_argument("--probe", action="store_true", help="measure the route minimum of "
                        "live entries above their mechanism minimum on the target")
    parser.add_argument("--json", action="store_true", help="the rated entries as JSON")
    args = parser.parse_args()
    if not Path("corpus", args.target).is_dir():
        print(f"corpus_ratio: no corpus/{args.target} here (run it from the repository root)",
              file=sys.stderr)
        return 2
    adapter = prepare(resolve(args.target))
    rated = rows(adapter, entries(args.target, args.rev))
    if args.json:
        keys = ("path", "status", "length", "minimum", "ratio", "mechanism", "mechanism_minimum")
        print(json.dumps([{k: r[k] for k in keys} for r in rated], indent=1))
        return 0
    live = [r for r in rated if r["status"] != "FIXED"]
    where = f"{args.target}{' at ' + args.rev if args.rev else ''}"
    print(f"{where}, all: {summary(rated)}")
    print(f"{where}, live (not FIXED): {summary(live)}")
    if args.probe:
        probe(adapter, rated)
        for r in rated:
            r["probed_ratio"] = r["length"] / r.get("probed", r["mechanism_minimum"])
        print(f"{where}, all, mechanism minimum probed: {summary(rated, 'probed_ratio')}")
        print(f"{where}, live, mechanism minimum probed: {summary(live, 'probed_ratio')}")
    if args.list:
        for r in sorted(rated, key=lambda r: -r["ratio"]):
            if r["ratio"] > 1:
                probed = f", probed {r['probed_ratio']:.2f}" if "probed_ratio" in r else ""
                print(f"{r['ratio']:.2f} (mechanism {r['mechanism']:.2f}{probed}) "
                      f"{r['status']:6} {r['path']}: {', '.join(r['ops'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
