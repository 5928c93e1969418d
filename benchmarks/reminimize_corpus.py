"""Re-minimize a framework's committed corpus entries and measure length / category minimum.

Run it with the framework's own tox environment, from the repository root::

    PYTHONPATH=$PWD .tox/adapter-langgraph/bin/python benchmarks/reminimize_corpus.py \
        langgraph --variants 'memory-*' 'sqlite-graph-sync-head-update' --max-time 90

For each entry it runs ``resumefuzz minimize`` (``fuzz.minimize``: the trace-level pass, each
candidate re-run on the framework) and divides the length before and after by the minimum of the
entry's category *for its variant*: the shortest exposure of that category's mutant using only
the operations the variant can express (``fuzz.minimize.category_minima``; ``resumefuzz explore
--target T --variant V`` prints the same).  Categories without a mutant (``Unclassified``) have
no minimum and are listed apart.

Without ``--write`` the new entries go to a scratch directory and the corpus is untouched; with
it, a shorter entry replaces the old one in ``corpus/`` and its report is regenerated in
``shrink_reports/`` (``fuzz.report.write``).
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from fuzz.cli import main as resumefuzz
from fuzz.minimize import category_minima
from fuzz.targets import prepare, resolve, select_variants


def run(target: str, patterns: list[str], max_time: float, write: bool) -> dict:
    adapter = prepare(resolve(target))
    root = Path("corpus") / target
    variants = sorted(d.name for d in root.iterdir() if d.is_dir()
                      and any(fnmatch.fnmatch(d.name, p) for p in patterns))
    scratch = Path(tempfile.mkdtemp(prefix="reminimize-"))
    minima_by_caps: dict = {}
    rows = []
    for name in variants:
        (variant,) = select_variants(adapter, [name])
        caps = adapter.capabilities(variant)
        if repr(caps) not in minima_by_caps:
            minima_by_caps[repr(caps)] = category_minima(caps)
        minima = minima_by_caps[repr(caps)]
        args = ["minimize", str(root / name), "--json", "--max-time", str(max_time)]
        args += ["--replace"] if write else ["--corpus", str(scratch / "corpus"),
                                              "--reports", str(scratch / "reports")]
        out = io.StringIO()
        started = time.monotonic()
        with contextlib.redirect_stdout(out):
            status = resumefuzz(args)
        if status != 0:
            rows.append({"variant": name, "error": f"resumefuzz minimize exited {status}"})
            continue
        for entry in json.loads(out.getvalue()):
            minimum = minima.get(entry["category"])
            rows.append({**entry, "variant": name, "minimum": minimum,
                         "ratio_before": minimum and round(entry["before"] / minimum, 3),
                         "ratio_after": minimum and round(entry["after"] / minimum, 3)})
        print(f"{name}: {len(rows)} entries so far ({time.monotonic() - started:.0f}s)",
              file=sys.stderr)
    return {"target": target, "variants": variants, "max_time": max_time, "rows": rows,
            "summary": summarize(rows)}


def summarize(rows: list[dict]) -> dict:
    rated = [r for r in rows if r.get("minimum")]
    out = {"entries": len(rows), "rated": len(rated),
           "unrated": sorted({r.get("category", "?") for r in rows if not r.get("minimum")}),
           "stopped_by_deadline": sum(r.get("stopped") == "deadline" for r in rows)}
    for when in ("before", "after"):
        ratios = [r[f"ratio_{when}"] for r in rated]
        if ratios:
            out[when] = {"median": round(statistics.median(ratios), 3),
                         "mean": round(statistics.mean(ratios), 3), "max": max(ratios),
                         "mean_length": round(statistics.mean(r[when] for r in rated), 2)}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target")
    parser.add_argument("--variants", nargs="+", default=["*"], metavar="GLOB")
    parser.add_argument("--max-time", type=float, default=120.0, metavar="S",
                        help="per entry (default 120)")
    parser.add_argument("--write", action="store_true",
                        help="replace corpus entries that got shorter, regenerate their reports")
    parser.add_argument("--json", metavar="FILE", help="write the rows and summary here")
    args = parser.parse_args()
    result = run(args.target, args.variants, args.max_time, args.write)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    for r in result["rows"]:
        if "error" in r:
            print(f"{r['variant']}: {r['error']}")
            continue
        print(f"{r['variant']:44} {r['category']:15} {r['before']:>3} -> {r['after']:<3} "
              f"min {r['minimum'] or '-'}  ({r['judged']} run, {r['stopped']}, {r['seconds']}s)")
    print(json.dumps(result["summary"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
