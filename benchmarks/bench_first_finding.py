"""Time to the first finding of each category, per framework, and from divergence to report.

    PYTHONPATH=$PWD .tox/adapter-<fw>/bin/python benchmarks/bench_first_finding.py <fw> \
        [--variant NAME] [--seeds 1 2 3] [--max-time 150] [--json FILE]

One time-boxed campaign per seed on one variant (the framework's default below, or
``--variant``), profile ``ci`` (no example database: every campaign starts fresh), shrinking on,
forked workers (the nightly's mode).  From the engine's own events:

- *divergence*: the first failure a Hypothesis run raises (``fuzz.internal.flaky.Best.offer``,
  which sees every failure the machine raises), timed on a clock that leaves out the time spent
  shrinking and writing earlier findings, so it is the search's own time to that category;
- *report*: the ``finding`` event, once the corpus entry, the report and its checked script are
  written; *report - divergence* is Hypothesis's shrink, the trace-level pass, the rate (if
  timing-dependent) and the script check.

A category first diverged and then suppressed in its own shrink (its run found another category
first) is attributed to what was written.  The median over the seeds is printed per category;
a category found in fewer seeds than ran shows its count ("2/3").
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from fuzz.campaign import CampaignOptions, fuzz_variant
from fuzz.internal import flaky
from fuzz.targets import prepare, resolve

DEFAULTS = {  # the variant each framework's row is measured on: its most used persistence
    "langgraph": "sqlite-graph-sync-head-update",
    "pydantic-graph": "file-single-resume_ifp-recover_ifp",
    "crewai": "persist-sqlite",
    "llamaindex": "core-wait-idle",
    "autogen": "graphflow-loop-hitl-sqlite",
}


def one(target: str, variant_name: str, seed: int, max_time: float) -> dict:
    adapter = prepare(resolve(target))
    variant = next(v for v in adapter.variants() if v.name == variant_name)
    started = time.perf_counter()
    aside = 0.0  # time spent between a divergence and its written finding (not search time)
    pending: dict = {}  # the current run's first divergence: {"at", "wall"}
    found: dict = {}
    inner = flaky.Best.offer

    def offer(best, failure):
        if not pending:
            now = time.perf_counter()
            pending.update(at=now - started - aside, wall=now,
                           category=failure.divergence.category)
        return inner(best, failure)

    def observe(event, **data):
        nonlocal aside
        if event != "finding":
            return
        now = time.perf_counter()
        category = data["found"].category
        if pending and category not in found:
            found[category] = {"divergence_s": round(pending["at"], 1),
                               "to_report_s": round(now - pending["wall"], 1),
                               "length": data["found"].length}
        if pending:
            aside += now - pending["wall"]
        pending.clear()

    flaky.Best.offer = offer
    try:
        with tempfile.TemporaryDirectory() as tmp:
            options = CampaignOptions(max_time=max_time, seed=seed, profile="ci",
                                      corpus_dir=Path(tmp) / "c", reports_dir=Path(tmp) / "r",
                                      workdir=Path(tmp) / "w")
            result = fuzz_variant(adapter, variant, options, None, max_time, observe)
    finally:
        flaky.Best.offer = inner
    return {"seed": seed, "examples": result.examples, "seconds": result.seconds,
            "harness_errors": result.harness_errors, "categories": found}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("target", choices=sorted(DEFAULTS))
    parser.add_argument("--variant")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--max-time", type=float, default=150.0)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    variant = args.variant or DEFAULTS[args.target]
    runs = []
    for seed in args.seeds:
        run = one(args.target, variant, seed, args.max_time)
        runs.append(run)
        print(json.dumps(run), file=sys.stderr, flush=True)
    categories = sorted({c for r in runs for c in r["categories"]})
    rows = []
    for category in categories:
        hits = [r["categories"][category] for r in runs if category in r["categories"]]
        rows.append({"category": category, "found": f"{len(hits)}/{len(runs)}",
                     "divergence_s": statistics.median(h["divergence_s"] for h in hits),
                     "to_report_s": statistics.median(h["to_report_s"] for h in hits),
                     "length": statistics.median(h["length"] for h in hits)})
    if args.json:
        Path(args.json).write_text(json.dumps({"target": args.target, "variant": variant,
                                               "max_time": args.max_time, "runs": runs,
                                               "rows": rows}, indent=2) + "\n")
    print(f"{args.target} [{variant}], {len(runs)} seeds, {args.max_time:.0f} s each; examples "
          f"{[r['examples'] for r in runs]}")
    print("| category | found in | median s to divergence | median s divergence -> report | "
          "median length |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['category']} | {r['found']} | {r['divergence_s']} | {r['to_report_s']} | "
              f"{r['length']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
