"""Shrink quality and time per mutant: Hypothesis's shrink, then the trace-level pass.

    python benchmarks/bench_shrink.py [--seeds 1 2 3 4 5] [--mutants Replay ...] [--json FILE]

For each mutant and seed, two campaigns with the same seed and a fresh database (profile ``ci``,
500 examples, stopping at the first finding):

- ``--no-shrink``: the time to the first finding, i.e. to the first divergence written as found;
- the default: Hypothesis's shrink, then ``fuzz.minimize``: lengths after each, and the time to
  the written report.

With one seed the generation phase is the same in both runs, so *report - first* is the time
from the first divergence to the written, shrunk report.  *min* is the category's minimum
(``fuzz.minimize.category_minima``, the shortest exposure ``resumefuzz explore`` finds over the
small workflows the machine draws).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from fuzz import minimize as minimize_module
from fuzz.campaign import CampaignOptions, fuzz_variant
from fuzz.targets import prepare, resolve
from refmodel import MUTANTS

EXAMPLES = 500


def one(mutant: str, seed: int, shrink: bool) -> dict:
    adapter = prepare(resolve(f"mutant:{mutant}"))
    seen: dict = {}
    spent = []
    inner = minimize_module.minimize

    def timed(*args, **kwargs):  # how long the trace-level pass takes, within the campaign
        started = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - started)

    def observe(event, **data):
        if event == "finding" and data["found"].category == mutant and "at" not in seen:
            seen.update(at=time.perf_counter() - started, length=data["found"].length,
                        hypothesis=data.get("shrunk"))

    minimize_module.minimize = timed
    try:
        with tempfile.TemporaryDirectory() as tmp:
            options = CampaignOptions(max_examples=EXAMPLES, seed=seed, profile="ci",
                                      stop_on_finding=True, shrink=shrink,
                                      corpus_dir=Path(tmp) / "c", reports_dir=Path(tmp) / "r",
                                      workdir=Path(tmp) / "w")
            started = time.perf_counter()
            fuzz_variant(adapter, adapter.variants()[0], options, EXAMPLES, None, observe)
    finally:
        minimize_module.minimize = inner
    return {**seen, "minimize_seconds": round(sum(spent), 2)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--mutants", nargs="+", default=list(MUTANTS))
    parser.add_argument("--timing-seeds", type=int, default=3,
                        help="seeds (the first N) that also run without shrinking, for times")
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--from-log", nargs="+", metavar="FILE",
                        help="only tabulate the rows earlier runs printed on stderr")
    args = parser.parse_args()
    rows = []
    if args.from_log:
        rows = [json.loads(line) for f in args.from_log for line in Path(f).read_text().splitlines()
                if line.startswith("{")]
        args.seeds = []
    minima = minimize_module.category_minima() if args.seeds else {}
    for seed in args.seeds:  # seeds outermost: a run cut short still covers every mutant
        for mutant in args.mutants:
            shrunk = one(mutant, seed, shrink=True)
            first = one(mutant, seed, shrink=False) if seed in args.seeds[:args.timing_seeds] \
                else {}
            row = {"mutant": mutant, "seed": seed, "minimum": minima[mutant],
                   "hypothesis": shrunk.get("hypothesis"), "final": shrunk.get("length"),
                   "first_s": first.get("at"), "report_s": shrunk.get("at"),
                   "minimize_s": shrunk["minimize_seconds"]}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    table = summarize(rows)
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "table": table}, indent=2) + "\n")
    print("| mutant | min | Hypothesis lengths | final lengths | final / min | "
          "median s to first finding | median s divergence -> report | median s in minimize |")
    print("|---|---|---|---|---|---|---|---|")
    for t in table:
        print(f"| {t['mutant']} | {t['minimum']} | {t['hypothesis']} | {t['final']} | "
              f"{t['ratio']} | {t['first_s']} | {t['to_report_s']} | {t['minimize_s']} |")
    return 0


def _median(values):
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 1) if values else None


def summarize(rows):
    out = []
    for mutant in sorted(dict.fromkeys(r["mutant"] for r in rows), key=MUTANTS.index):
        mine = [r for r in rows if r["mutant"] == mutant]
        finals = [r["final"] for r in mine]
        found = [n for n in finals if n]
        out.append({
            "mutant": mutant, "minimum": mine[0]["minimum"],
            "hypothesis": [r["hypothesis"] for r in mine], "final": finals,
            "ratio": round(statistics.mean(n / mine[0]["minimum"] for n in found), 2)
            if found else None,
            "first_s": _median(r["first_s"] for r in mine),
            "to_report_s": _median(r["report_s"] - r["first_s"] for r in mine
                                   if r["report_s"] is not None and r["first_s"] is not None),
            "minimize_s": _median(r["minimize_s"] for r in mine),
        })
    return out


if __name__ == "__main__":
    sys.exit(main())
