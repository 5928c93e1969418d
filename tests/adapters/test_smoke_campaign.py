"""A short bounded campaign on one framework adapter, end to end through the real machinery.

Run by each ``adapter-<framework>`` tox environment, which names the target in
``RESUMEFUZZ_SMOKE_TARGET``.  The campaign runs as ``resumefuzz fuzz`` in a fresh interpreter
(the adapter's in-process tests may have started framework threads in this one, and a parent
with threads must not fork workers).  It exercises every variant (workers, barriers, ledger,
corpus and report writing, evidence) without shrinking, which would dominate its time, and
asserts no verdict: what the fuzzer finds is for
campaigns to report.  It does assert that no framework reached past loopback.
"""

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

TARGET = os.environ.get("RESUMEFUZZ_SMOKE_TARGET")
SMOKE_JOBS = max(1, int(os.environ.get("RESUMEFUZZ_SMOKE_JOBS", "3")))
ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not TARGET, reason="RESUMEFUZZ_SMOKE_TARGET names no adapter here"),
]


def test_every_variant_runs_a_bounded_campaign(tmp_path, capsys):
    listing = subprocess.run([sys.executable, "-m", "fuzz.cli", "targets", TARGET, "--json"],
                             cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert listing.returncode == 0, listing.stderr
    variants = [v["name"] for v in json.loads(listing.stdout)["variants"]]
    per_variant = int(os.environ.get("RESUMEFUZZ_SMOKE_EXAMPLES", "2"))
    netlog = tmp_path / "net.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RESUMEFUZZ_NETGUARD_LOG": str(netlog)}

    def fuzz(group):
        return subprocess.run(
            [sys.executable, "-m", "fuzz.cli", "fuzz", TARGET, "--profile", "ci", "--seed", "0",
             "--no-shrink", *(a for v in group for a in ("--variant", v)),
             "--max-examples", str(per_variant * len(group)), "--op-timeout",
             os.environ.get("RESUMEFUZZ_SMOKE_OP_TIMEOUT", "60"), "--json",
             "--corpus", "corpus", "--reports", "reports", "--results", "results"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=3000)

    # The variants, round-robin, in SMOKE_JOBS campaigns at once: a variant that waits (an HTTP
    # server's 30 s grace after a SIGKILL) waits beside the others instead of before them.
    groups = [variants[i::SMOKE_JOBS] for i in range(min(SMOKE_JOBS, len(variants)))]
    with ThreadPoolExecutor(len(groups)) as pool:
        procs = list(pool.map(fuzz, groups))
    for proc in procs:
        assert proc.returncode in (0, 1), proc.stderr[-3000:]
    parts = [json.loads(proc.stdout) for proc in procs]
    summary = {"variants": [v for part in parts for v in part["variants"]],
               "findings": [f for part in parts for f in part["findings"]],
               **{key: sum(part[key] for part in parts) for key in ("examples", "operations")}}
    with capsys.disabled():
        print(f"\n{TARGET}: smoke campaign, {summary['examples']} examples, "
              f"{summary['operations']} ops in {max(part['seconds'] for part in parts)}s "
              f"({len(groups)} campaigns at once)")
        for f in summary["findings"]:
            print(f"  [{f['variant']}] {f['category']} ({f['length']} ops)")
    assert sorted(summary["variants"]) == sorted(variants)
    for group, part in zip(groups, parts):
        assert part["variants"] == group
    evidence = sorted(p.stem for p in (tmp_path / "results").rglob("*.json"))
    assert len(evidence) == len(variants)  # every variant ran and left its evidence
    for f in summary["findings"]:
        assert (tmp_path / f["corpus"]).exists() and (tmp_path / f["report"]).exists()
    # No framework may reach past loopback during a campaign (telemetry off, no network).
    assert not netlog.exists(), f"non-loopback connection attempts: {netlog.read_text()}"
