"""A short bounded campaign on one framework adapter, end to end through the real machinery.

Run by each ``adapter-<framework>`` tox environment, which names the target in
``RESUMEFUZZ_SMOKE_TARGET``.  It exercises every variant (workers, barriers, ledger, corpus and
report writing) and asserts no verdict: what the fuzzer finds is for campaigns to report.
"""

import os

import pytest

from fuzz.campaign import CampaignOptions, run_campaign
from fuzz.targets import prepare, resolve

TARGET = os.environ.get("RESUMEFUZZ_SMOKE_TARGET")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not TARGET, reason="RESUMEFUZZ_SMOKE_TARGET names no adapter here"),
]


def test_every_variant_runs_a_bounded_campaign(tmp_path, capsys):
    adapter = prepare(resolve(TARGET), netguard_log=str(tmp_path / "net.log"))
    variants = list(adapter.variants())
    per_variant = int(os.environ.get("RESUMEFUZZ_SMOKE_EXAMPLES", "3"))
    options = CampaignOptions(max_examples=per_variant * len(variants), seed=0, profile="ci",
                              corpus_dir=tmp_path / "corpus", reports_dir=tmp_path / "reports",
                              workdir=tmp_path / "work", op_timeout=120)
    results = run_campaign(adapter, variants, options)
    with capsys.disabled():
        print(f"\n{TARGET}: smoke campaign")
        for r in results:
            cats = ", ".join(sorted({f"{f.category}({f.length})" for f in r.findings})) or "none"
            print(f"  [{r.variant}] {r.examples} examples, {r.operations} ops: {cats}")
    assert [r.variant for r in results] == [v.name for v in variants]
    assert all(r.examples >= 1 and r.operations >= 1 for r in results)
    for r in results:
        for f in r.findings:
            assert (tmp_path / "corpus").exists() and os.path.exists(f.report)
    # No framework may reach past loopback during a campaign (telemetry off, no network).
    log = tmp_path / "net.log"
    assert not log.exists(), f"non-loopback connection attempts: {log.read_text()}"
