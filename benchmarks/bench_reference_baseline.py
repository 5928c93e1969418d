"""The baseline: a long campaign on the `reference` target must find nothing.

    python benchmarks/bench_reference_baseline.py [EXAMPLES] [SEED]     # default 10000, seed 11

The reference is the refmodel on a real on-disk store, run through the same forked workers,
SIGKILL barriers, races and twin recoveries as a framework: any finding (or harness error) here is
a defect of the machinery, not of a target.  Run it under load (`nice -n 10`, other work on the
machine): races after a SIGKILL in flight are the case that used to produce a false LostUpdate.
Prints the result as a Markdown table (its last value: benchmarks/README.md, "The reference
baseline") and exits 1 when anything was found.
"""

import sys
import tempfile
import time
from pathlib import Path

from fuzz.campaign import CampaignOptions, fuzz_variant
from fuzz.targets import prepare, resolve


def main() -> int:
    examples = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 11
    adapter = prepare(resolve("reference"))
    with tempfile.TemporaryDirectory() as tmp:
        options = CampaignOptions(max_examples=examples, seed=seed, profile="ci", mode="fork",
                                  corpus_dir=Path(tmp) / "c", reports_dir=Path(tmp) / "r",
                                  workdir=Path(tmp) / "w")
        started = time.perf_counter()
        result = fuzz_variant(adapter, adapter.variants()[0], options, examples, None)
        seconds = time.perf_counter() - started
    bad = len(result.findings) + len(result.flaky) + result.harness_errors + len(result.errors)
    print("| examples asked | example runs | operations | findings | flaky | harness errors | s |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {examples} | {result.examples} | {result.operations} | {len(result.findings)} | "
          f"{len(result.flaky)} | {result.harness_errors} | {seconds:.0f} |")
    for finding in result.findings:
        print(f"finding: {finding.category} ({finding.verdict}), {finding.length} ops", file=sys.stderr)
    for error in result.errors:
        print(f"error: {error}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
