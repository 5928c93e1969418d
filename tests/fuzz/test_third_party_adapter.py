"""A third-party adapter plugs in by dotted path, without touching this repository."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_docs_example_adapter_fuzzes_by_dotted_path(tmp_path):
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'docs' / 'examples'}"}
    proc = subprocess.run(
        [sys.executable, "-m", "fuzz.cli", "fuzz", "toy_adapter:ToyAdapter", "--max-examples",
         "60", "--seed", "2", "--json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode in (0, 1), proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["variants"] == ["json-files"] and summary["operations"] > 0
    for finding in summary["findings"]:  # whatever it found was written down
        assert (tmp_path / finding["corpus"]).exists()
