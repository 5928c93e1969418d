"""The corpus as regression tests: every entry replays with the status it recorded.

An entry is replayed when its target is installed in this environment: the built-in targets in
the `core` environment (and any framework whose adapter imports there), one framework's entries in
that framework's `adapter-<framework>` environment (named by RESUMEFUZZ_SMOKE_TARGET).  Only
those are collected: the entries of frameworks not installed here are no skipped tests but one
counted line (a warning in the summary), and every one of them is still checked to be a valid
trace naming a registered target.  A replay whose status differs from the recorded
one fails, saying what changed; a framework release that fixed a behaviour shows up here first.

The replays run as `resumefuzz replay --json` in a fresh interpreter: this test process may have
run framework code already (an adapter's in-process tests), and a parent with threads must not
fork workers.  The corpus holds only entries that replayed alike every time after their
campaign; timing-dependent findings are kept as shrink reports (see README, "replay").  A few
entries still ride on a free race or a framework's background writer, so an entry whose replay
differs is replayed twice more: it fails when its recorded status comes back in none of the
three replays.
"""

import json
import os
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path

import pytest

from fuzz.corpus import entries
from fuzz.errors import ResumefuzzError
from fuzz.targets import known_targets, prepare, resolve_registered
from fuzz.trace import load_trace

ROOT = Path(__file__).resolve().parents[2]
ONLY = os.environ.get("RESUMEFUZZ_SMOKE_TARGET")
BUILT_IN = ("reference", "mutant:")


def _selected():
    """(entries replayed here, Counter of the targets whose entries are not)."""
    out, elsewhere = [], Counter()
    for path in entries(None, ROOT / "corpus"):
        try:
            target = load_trace(path).target
        except ResumefuzzError:
            out.append(path)  # a malformed entry must fail loudly below
            continue
        if ONLY is not None:
            if target == ONLY:
                out.append(path)
        elif target.startswith(BUILT_IN) or _framework_here(target):
            out.append(path)
        else:
            elsewhere[target] += 1
    return out, elsewhere


@pytest.fixture(scope="module")
def replays():
    """Replay every selected entry whose target is installed, once, in a fresh interpreter."""
    paths = []
    for p in SELECTED:
        try:
            load_trace(p)
        except ResumefuzzError:
            continue  # fails in its own test, naming the field
        paths.append(str(p))
    if not paths:
        return {}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "fuzz.cli", "replay", "--json",
                           "--op-timeout", "120", *paths],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=3000)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return {Path(r["path"]).resolve(): r for r in json.loads(proc.stdout)}


def _replay_once(path: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "fuzz.cli", "replay", "--json",
                           "--op-timeout", "120", str(path)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return json.loads(proc.stdout)[0]


_here: dict = {}


def _framework_here(target: str) -> bool:
    """Is the target's framework importable in this environment (checked once per target)?"""
    if target not in _here:
        try:
            prepare(resolve_registered(target))  # a file's target is never imported by path
            _here[target] = True
        except ResumefuzzError:
            _here[target] = False
    return _here[target]


SELECTED, ELSEWHERE = _selected()


def test_entries_not_replayed_here_are_valid_and_counted():
    # Not a skip list: each entry not replayed here is still read and checked (a malformed file,
    # or one naming code instead of a registered target, fails here), and their number is shown.
    registered = set(known_targets())
    for path in entries(None, ROOT / "corpus"):
        trace = load_trace(path)
        assert trace.target in registered, f"{path}: target {trace.target!r} is not registered"
    if ELSEWHERE:
        counts = ", ".join(f"{t} {n}" for t, n in sorted(ELSEWHERE.items()))
        warnings.warn(f"{sum(ELSEWHERE.values())} corpus entries not replayed in this environment, "
                      f"their frameworks not being installed here ({counts}); "
                      "tox -e adapter-<framework> replays them", stacklevel=1)


# No entry for this environment means no test here (not a skipped one: an adapter environment
# turns skips into failures, and a framework with nothing in the corpus has nothing to replay).
if SELECTED:

    @pytest.mark.slow
    @pytest.mark.parametrize("path", SELECTED,
                             ids=lambda p: str(p.relative_to(ROOT / "corpus")))
    def test_entry_replays_with_its_recorded_status(path, replays):
        trace = load_trace(path)  # a malformed entry fails here, naming the field
        result = replays.get(path.resolve())
        assert result is not None, f"{path}: selected here, yet the replay did not report it"
        recorded = trace.status or "FAILED"
        seen = [result]
        while seen[-1]["status"] != recorded and len(seen) < 3:
            seen.append(_replay_once(path))
        assert seen[-1]["status"] == recorded, (
            f"{path.relative_to(ROOT)}: recorded {recorded} "
            f"({trace.finding.category if trace.finding else 'no finding'}), 3 replays now say "
            f"{', '.join(r['status'] for r in seen)}: {seen[-1]['detail']}")
