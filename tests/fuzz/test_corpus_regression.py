"""The corpus as regression tests: every entry replays with the status it recorded.

An entry is replayed when its target is installed in this environment: the built-in targets in
the `core` environment, one framework's entries in that framework's `adapter-<framework>`
environment (named by RESUMEFUZZ_SMOKE_TARGET).  A replay whose status differs from the recorded
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
from pathlib import Path

import pytest

from fuzz.corpus import entries
from fuzz.errors import ResumefuzzError
from fuzz.targets import prepare, resolve
from fuzz.trace import load_trace

ROOT = Path(__file__).resolve().parents[2]
ONLY = os.environ.get("RESUMEFUZZ_SMOKE_TARGET")
BUILT_IN = ("reference", "mutant:")
# Entries fuzzed on a custom store (`--store`) name their factory in `versions`; a corpus file
# never decides what gets imported, so they replay only where the environment itself names that
# factory (RESUMEFUZZ_STORES, set by `adapter-langgraph` and each `adapter-store-<name>` tox
# environment); RESUMEFUZZ_STORES_ONLY=1 (the store environments) leaves the others out.
STORES_HERE = {s for s in os.environ.get("RESUMEFUZZ_STORES", "").split(",") if s}
STORES_ONLY = os.environ.get("RESUMEFUZZ_STORES_ONLY") == "1"


def _store(trace) -> str | None:
    return trace.versions.get("store-factory")


def _selected():
    out = []
    for path in entries(None, ROOT / "corpus"):
        try:
            trace = load_trace(path)
        except ResumefuzzError:
            out.append(path)  # a malformed entry must fail loudly below
            continue
        store = _store(trace)
        if (store not in STORES_HERE) if store is not None else STORES_ONLY:
            continue
        if ONLY is None or trace.target == ONLY:
            out.append(path)
    return out


def _replay_args(paths, store: str | None) -> list:
    return [sys.executable, "-m", "fuzz.cli", "replay", "--json", "--op-timeout", "120",
            *(["--store", store] if store else []), *map(str, paths)]


def _installed(target: str) -> bool:
    try:
        resolve(target)
        return True
    except ResumefuzzError:
        return False


@pytest.fixture(scope="module")
def replays():
    """Replay every selected entry whose target is installed, once, in a fresh interpreter."""
    by_store: dict = {}
    for p in SELECTED:
        try:
            trace = load_trace(p)
        except ResumefuzzError:
            continue
        target = trace.target
        if ONLY is not None or target.startswith(BUILT_IN) or _framework_here(target):
            by_store.setdefault(_store(trace), []).append(p)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = {}
    for store, paths in by_store.items():  # one `replay` per store factory (--store X)
        proc = subprocess.run(_replay_args(paths, store), cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=3000)
        assert proc.returncode in (0, 1), proc.stderr[-3000:]
        out.update({Path(r["path"]).resolve(): r for r in json.loads(proc.stdout)})
    return out


def _replay_once(path: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(_replay_args([path], _store(load_trace(path))),
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return json.loads(proc.stdout)[0]


_here: dict = {}


def _framework_here(target: str) -> bool:
    """Is the target's framework importable in this environment (checked once per target)?"""
    if target not in _here:
        try:
            prepare(resolve(target))
            _here[target] = True
        except ResumefuzzError:
            _here[target] = False
    return _here[target]


SELECTED = _selected()


# No entry for this environment means no test here (not a skipped one: an adapter environment
# turns skips into failures, and a framework with nothing in the corpus has nothing to replay).
if SELECTED:

    @pytest.mark.slow
    @pytest.mark.parametrize("path", SELECTED,
                             ids=lambda p: str(p.relative_to(ROOT / "corpus")))
    def test_entry_replays_with_its_recorded_status(path, replays):
        trace = load_trace(path)  # a malformed entry fails here, naming the field
        result = replays.get(path.resolve())
        if result is None:
            pytest.skip(f"{trace.target} is not installed in this environment")
        recorded = trace.status or "FAILED"
        seen = [result]
        while seen[-1]["status"] != recorded and len(seen) < 3:
            seen.append(_replay_once(path))
        assert seen[-1]["status"] == recorded, (
            f"{path.relative_to(ROOT)}: recorded {recorded} "
            f"({trace.finding.category if trace.finding else 'no finding'}), 3 replays now say "
            f"{', '.join(r['status'] for r in seen)}: {seen[-1]['detail']}")
