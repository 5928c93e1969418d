"""The matrix and the nightly run, on the built-in targets."""

import json
import os

import pytest

from fuzz.cli import main
from fuzz.nightly import NightlyOptions, run_nightly

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def nightly(tmp_path_factory):
    root = tmp_path_factory.mktemp("nightly")
    cwd = os.getcwd()
    os.chdir(root)
    try:
        options = NightlyOptions(targets=["reference", "mutant:Replay"], max_examples=40,
                                 seed=3, profile="ci", jobs=2)
        summary = run_nightly(options, log=lambda line: None)
    finally:
        os.chdir(cwd)
    return root, summary


def test_nightly_runs_campaigns_replays_and_renders(nightly):
    root, summary = nightly
    assert {(c["target"], c["variant"]) for c in summary.campaigns} == {
        ("reference", "default"), ("mutant:Replay", "default")}
    assert all("error" not in c for c in summary.campaigns)
    replay = next(c for c in summary.campaigns if c["target"] == "mutant:Replay")
    assert [f["category"] for f in replay["findings"]] == ["Replay"]
    assert summary.replays and all(r["status"] == "FAILED" for r in summary.replays)
    assert summary.changed == []
    assert (root / "results" / "matrix.md").exists() and (root / "results" / "matrix.html").exists()


def test_matrix_cells(nightly, capsys):
    root, _ = nightly
    os.chdir(root)
    assert main(["matrix", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {(r["target"], r["variant"]): r["cells"] for r in doc["rows"]}
    replay = rows[("mutant:Replay", "default")]
    assert replay["EO"]["verdict"] == "✗" and replay["EO"]["link"].endswith(".md")
    assert replay["PC"]["verdict"] == "✓" and replay["PC"]["examples"] > 0
    ref = rows[("reference", "default")]
    assert {c["verdict"] for c in ref.values()} == {"✓"}
    assert all(c["age_days"] is not None for c in ref.values())


def test_matrix_html_works_offline(nightly):
    root, _ = nightly
    page = (root / "results" / "matrix.html").read_text()
    assert "<table>" in page and "http://" not in page and "https://" not in page
    assert 'href="../shrink_reports/' in page  # links relative to the page, to local files


def test_nightly_flags_an_entry_a_release_fixed(nightly, capsys):
    root, _ = nightly
    os.chdir(root)
    entry = next((root / "corpus" / "mutant_Replay").rglob("*.json"))
    doc = json.loads(entry.read_text())
    doc["target"] = "reference"  # as if the framework had been fixed
    fixed = root / "corpus" / "reference" / "default" / entry.name
    fixed.parent.mkdir(parents=True, exist_ok=True)
    fixed.write_text(json.dumps(doc))
    summary = run_nightly(NightlyOptions(targets=["reference"], max_examples=5, seed=1,
                                         profile="ci"), log=lambda line: None)
    assert [c["now"] for c in summary.changed] == ["FIXED"]
    assert json.loads(fixed.read_text())["status"] == "FIXED"
