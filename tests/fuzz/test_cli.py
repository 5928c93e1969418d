"""The command line: exit codes, one-line errors, nothing written on bad input."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz.cli import main

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "fuzz.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("args, message", [
    (["fuzz", "nosuchthing"], "unknown target 'nosuchthing'"),
    (["fuzz", "mutant:Nope"], "unknown mutant 'Nope'"),
    (["fuzz", "reference", "--variant", "nope"], "has no variant 'nope'"),
    (["fuzz", "reference", "--max-examples", "0"], "--max-examples"),
    (["fuzz", "nosuch.module:Adapter"], "cannot import 'nosuch.module'"),
    (["explore", "--gates", "9"], "gates"),
])
def test_usage_errors_are_one_line_exit_2_and_write_nothing(in_tmp, capsys, args, message):
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert list(in_tmp.iterdir()) == []


def test_malformed_corpus_file_is_an_error_entry_and_kept(in_tmp, capsys):
    bad = in_tmp / "corpus" / "x" / "bad.json"
    bad.parent.mkdir(parents=True)
    bad.write_text("{ not json")
    assert main(["replay", "--json"]) == 1
    (result,) = json.loads(capsys.readouterr().out)
    assert result["status"] == "ERROR" and "not JSON" in result["detail"]
    assert bad.read_text() == "{ not json"


def test_replay_with_no_corpus_is_a_usage_error(in_tmp, capsys):
    assert main(["replay"]) == 2
    assert "no corpus entries" in capsys.readouterr().err


def test_fuzz_json_summary_and_exit_1_on_a_finding(tmp_path):
    proc = run_cli("fuzz", "mutant:LostUpdate", "--max-examples", "200", "--seed", "3",
                   "--json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    summary = json.loads(proc.stdout)
    assert set(summary) >= {"target", "variants", "examples", "seconds", "findings"}
    (finding,) = [f for f in summary["findings"] if f["category"] == "LostUpdate"]
    assert set(finding) >= {"variant", "category", "property", "length", "corpus", "report"}
    assert (tmp_path / finding["corpus"]).exists() and (tmp_path / finding["report"]).exists()
    replay = run_cli("replay", finding["corpus"], cwd=tmp_path)
    assert replay.returncode == 1 and "FAILED" in replay.stdout


def test_fuzz_exit_0_when_nothing_found(tmp_path):
    proc = run_cli("fuzz", "reference", "--max-examples", "20", "--seed", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "nothing found" in proc.stdout


def test_explore_json(tmp_path):
    proc = run_cli("explore", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["config"] == {"n": 3, "gates": [2], "values": ["a", "b"], "depth": 3}
    assert doc["reference_divergence"] is None
    for name, m in doc["mutants"].items():
        assert m["category"] == name and m["length"] == len(m["trace"]) >= 1


# Signals, orphans and temp folders: tests/fuzz/test_lifetime.py.
