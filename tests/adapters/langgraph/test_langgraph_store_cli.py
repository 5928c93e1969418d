"""A store author on the command line (``resumefuzz fuzz langgraph --store``): every finding is
replayed on LangGraph's own ``SqliteSaver`` and owned accordingly, so a correct saver exits 0
although LangGraph has defects of its own, and a saver's own defects are found, owned by the
store, with a property and the saver methods to look at (issue 42)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from langgraph_testkit import ROOT

HERE = Path(__file__).parent
VARIANT = "graph-sync-head-update"


def fuzz(tmp_path, func, store_name, *extra, examples=60):
    """``resumefuzz fuzz langgraph --store store_author_savers:<func> --json``: its exit status,
    its JSON summary and its stderr."""
    temp = tmp_path / "temp"
    temp.mkdir(exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "fuzz", "fuzz", "langgraph", "--store",
         f"store_author_savers:{func}", "--variant", f"store-{store_name}-{VARIANT}",
         "--max-examples", str(examples), "--seed", "1", "--no-shrink", "--op-timeout", "30",
         "--corpus", str(tmp_path / "corpus"), "--reports", str(tmp_path / "reports"),
         "--json", *extra],
        cwd=tmp_path, capture_output=True, text=True, timeout=900,
        env={**os.environ, "TMPDIR": str(temp),
             "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT), *sys.path])})
    assert done.returncode in (0, 1), done.stderr[-3000:]
    return done.returncode, json.loads(done.stdout), done.stderr


@pytest.mark.slow
def test_a_correct_saver_exits_0_and_langgraphs_own_findings_are_listed(tmp_path):
    pytest.importorskip("langgraph", reason="needs the LangGraph pins: constraints/langgraph.txt")
    code, out, err = fuzz(tmp_path, "correct", "correct")
    # LangGraph's own race (a LostUpdate its SqliteSaver shows too) is found on this seed: the
    # test would pass vacuously without a finding to own.
    assert out["findings"], err[-2000:]
    assert {f["owner"] for f in out["findings"]} <= {"framework"}, out["findings"]
    assert out["counted"] == 0 and code == 0, out["findings"]
    assert not list(tmp_path.glob("results")), "evidence is written only with --results"
    again, out2, _ = fuzz(tmp_path, "correct", "correct", "--include-framework")
    assert again == 1 and out2["counted"] == len(out2["findings"]) > 0


@pytest.mark.slow
def test_a_saver_that_drops_interrupts_is_the_stores_with_its_methods_named(tmp_path):
    pytest.importorskip("langgraph", reason="needs the LangGraph pins: constraints/langgraph.txt")
    code, out, err = fuzz(tmp_path, "no_interrupts", "nointerrupts", examples=20)
    theirs = [f for f in out["findings"] if f["owner"] == "store"]
    assert code == 1 and theirs, (out["findings"], err[-2000:])
    assert all(f["property"] != "-" for f in theirs)
    report = Path(theirs[0]["report"]).read_text()
    assert "Whose: the store's" in report and "put_writes" in report, report[:2000]


@pytest.mark.slow
def test_a_stale_read_is_found_as_the_stores_with_a_property(tmp_path):
    pytest.importorskip("langgraph", reason="needs the LangGraph pins: constraints/langgraph.txt")
    code, out, err = fuzz(tmp_path, "stale", "stale", examples=30)
    theirs = [f for f in out["findings"] if f["owner"] == "store"]
    assert code == 1 and theirs, (out, err[-2000:])
    assert all(f["category"] != "Unclassified" for f in theirs), theirs
    # A lagging read is never a tool error: nothing was discarded as one.
    assert all(h["count"] == 0 for h in out["harness_errors"]), out["harness_errors"]
