"""Fuzzing throughput on the `reference` target, per process mode, and time-to-detect per mutant.

    python benchmarks/bench_fuzz.py            # throughput in the three modes
    python benchmarks/bench_fuzz.py detect     # time-to-detect, median of 5 seeds per mutant

Modes: `inprocess` (no worker: exception crash points only, no races), `fork` (workers forked
from the prepared parent, SIGKILL crash points at barriers: the default), `spawn` (a fresh
interpreter per worker, which imports everything again).
"""

import statistics
import sys
import tempfile
import time
from pathlib import Path

from fuzz.campaign import CampaignOptions, fuzz_variant
from fuzz.targets import prepare, resolve
from refmodel import MUTANTS


def throughput(mode: str, examples: int, seed: int = 0):
    adapter = prepare(resolve("reference"))
    with tempfile.TemporaryDirectory() as tmp:
        options = CampaignOptions(max_examples=examples, seed=seed, profile="ci", mode=mode,
                                  corpus_dir=Path(tmp) / "c", reports_dir=Path(tmp) / "r",
                                  workdir=Path(tmp) / "w")
        started = time.perf_counter()
        result = fuzz_variant(adapter, adapter.variants()[0], options, examples, None)
        seconds = time.perf_counter() - started
    return result.examples / seconds, result.operations / seconds, result


def time_to_detect(mutant: str, seeds=range(1, 6)):
    adapter = prepare(resolve(f"mutant:{mutant}"))
    times, lengths = [], []
    for seed in seeds:
        with tempfile.TemporaryDirectory() as tmp:
            options = CampaignOptions(max_examples=3000, seed=seed, profile="ci",
                                      stop_on_finding=True, corpus_dir=Path(tmp) / "c",
                                      reports_dir=Path(tmp) / "r", workdir=Path(tmp) / "w")
            started = time.perf_counter()
            result = fuzz_variant(adapter, adapter.variants()[0], options, 3000, None)
            times.append(time.perf_counter() - started)
            found = [f for f in result.findings if f.category == mutant]
            lengths.append(found[0].length if found else None)
    return statistics.median(times), lengths


def main():
    if sys.argv[1:] == ["detect"]:
        from refmodel import Workflow, shortest_exposure

        wf = Workflow(3, {2}, ("a", "b"))
        print("| mutant | median s to detect+shrink | shrunk lengths (5 seeds) | minimal | ratio |")
        print("|---|---|---|---|---|")
        for mutant in MUTANTS:
            median, lengths = time_to_detect(mutant)
            minimal = shortest_exposure(wf, mutant, 3).length
            ratios = [round(n / minimal, 2) for n in lengths if n]
            print(f"| {mutant} | {median:.1f} | {lengths} | {minimal} | "
                  f"{statistics.mean(ratios) if ratios else '-'} |")
        return
    for mode, n in (("inprocess", 200), ("fork", 200), ("spawn", 20)):
        ex, ops, result = throughput(mode, n)
        print(f"{mode:9}: {ex:6.2f} examples/s, {ops:7.1f} ops/s "
              f"({result.examples} examples, {result.operations} ops)")


if __name__ == "__main__":
    main()
