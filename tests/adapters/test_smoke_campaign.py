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
from pathlib import Path

import pytest

TARGET = os.environ.get("RESUMEFUZZ_SMOKE_TARGET")
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
    proc = subprocess.run(
        [sys.executable, "-m", "fuzz.cli", "fuzz", TARGET, "--profile", "ci", "--seed", "0",
         "--no-shrink",
         "--max-examples", str(per_variant * len(variants)), "--op-timeout",
         os.environ.get("RESUMEFUZZ_SMOKE_OP_TIMEOUT", "60"), "--json",
         "--corpus", "corpus", "--reports", "reports", "--results", "results"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=3000)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    with capsys.disabled():
        print(f"\n{TARGET}: smoke campaign, {summary['examples']} examples, "
              f"{summary['operations']} ops in {summary['seconds']}s")
        for f in summary["findings"]:
            print(f"  [{f['variant']}] {f['category']} ({f['length']} ops)")
    assert summary["variants"] == variants
    evidence = sorted(p.stem for p in (tmp_path / "results").rglob("*.json"))
    assert len(evidence) == len(variants)  # every variant ran and left its evidence
    for f in summary["findings"]:
        assert (tmp_path / f["corpus"]).exists() and (tmp_path / f["report"]).exists()
    # No framework may reach past loopback during a campaign (telemetry off, no network).
    assert not netlog.exists(), f"non-loopback connection attempts: {netlog.read_text()}"
