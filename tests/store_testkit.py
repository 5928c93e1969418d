"""Helpers the bring-your-own-store tests of every framework share (tests/adapters/*/
test_*_custom_store.py): a bounded campaign on a store, and the read-after-tamper check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def bounded_campaign(target: str, store, variant: str, workdir: Path, *, examples: int = 4,
                     op_timeout: int = 60) -> dict:
    """``resumefuzz fuzz <target> --store ...`` on one variant, unshrunk, in a fresh process
    run in ``workdir``; checks the banner and the evidence's store fields, returns the evidence."""
    done = subprocess.run(
        [sys.executable, "-m", "fuzz", "fuzz", target, "--store", store.path,
         "--variant", variant, "--max-examples", str(examples), "--no-shrink", "--seed", "3",
         "--op-timeout", str(op_timeout), "--profile", "ci", "--results", "results"],
        capture_output=True, text=True, timeout=900, cwd=workdir,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])})
    assert done.returncode in (0, 1), done.stderr[-3000:]
    assert f"store: {store.path}" in done.stdout
    evidence = json.loads((Path(workdir) / "results" / target / f"{variant}.json").read_text())
    assert evidence["versions"][store.distribution] == store.version
    assert evidence["options"]["store_factory"] == store.path
    return evidence


def tamper_shows(case, thread: str) -> None:
    """After ``case.tamper(thread, "corrupt")``: the next read refuses loudly or differs."""
    from adapters.protocol import Unreadable

    before = case.query(thread)
    case.tamper(thread, "corrupt")
    try:
        after = case.query(thread)
    except Unreadable:
        return  # the store refuses the damaged data loudly
    assert after != before, "the tamper left the stored state as it was"
