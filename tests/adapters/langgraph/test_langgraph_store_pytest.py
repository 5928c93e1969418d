"""``resumefuzz.pytest`` can fail: a store author's suite on a saver with a defect of its own
fails, printing the category, the report's path and the replay line (no unchecked script), and
the baseline (LangGraph's own SqliteSaver) does not set that finding aside; it leaves no temp
folder behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from langgraph_testkit import ROOT

SUITE = Path(__file__).with_name("store_mutant_suite.py")


@pytest.mark.slow
def test_a_store_defect_fails_the_authors_test(tmp_path):
    pytest.importorskip("langgraph", reason="needs the LangGraph pins: constraints/langgraph.txt")
    temp = tmp_path / "temp"
    temp.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(SUITE), "-q", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), "--basetemp", str(tmp_path / "basetemp")],
        cwd=tmp_path, capture_output=True, text=True, timeout=900,
        env={**os.environ, "TMPDIR": str(temp),
             "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])})
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-3000:]
    assert "StoreFailure" in out and "on store-forgetful-graph-sync-head-update" in out, out[-3000:]
    assert "report: .resumefuzz/reports/langgraph/store-forgetful-graph-sync-head-update/" in out
    assert "replay: resumefuzz replay .resumefuzz/corpus/" in out and "--store" in out
    # The older generator's script (up to 2,000 lines, unchecked) is no longer pasted.
    assert "#!/usr/bin/env python3" not in out and "--verify 3" in out
    # Every session's resumefuzz-* folder (and a script runtime's repro-*) was left here before.
    assert sorted(p.name for p in temp.iterdir()) == []
    reports = list((tmp_path / ".resumefuzz" / "reports").rglob("*.md"))
    assert reports, "the failure wrote no report"
