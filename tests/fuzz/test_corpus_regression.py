"""The corpus as regression tests: every entry replays with the status it recorded.

An entry is replayed when its target is installed in this environment: the built-in targets in
the `core` environment, one framework's entries in that framework's `adapter-<framework>`
environment (named by RESUMEFUZZ_SMOKE_TARGET).  A replay whose status differs from the recorded
one fails, saying what changed; a framework release that fixed a behaviour shows up here first.
Entries marked timing-dependent pass when the recorded status comes up in any of 5 replays.
"""

import os
from pathlib import Path

import pytest

from fuzz.corpus import entries
from fuzz.errors import ResumefuzzError
from fuzz.replay import Replayer
from fuzz.targets import prepare, resolve
from fuzz.trace import load_trace

ROOT = Path(__file__).resolve().parents[2]
ONLY = os.environ.get("RESUMEFUZZ_SMOKE_TARGET")
BUILT_IN = ("reference", "mutant:")


def _selected():
    out = []
    for path in entries(None, ROOT / "corpus"):
        try:
            target = load_trace(path).target
        except ResumefuzzError:
            out.append(path)  # a malformed entry must fail loudly below
            continue
        if ONLY is None or target == ONLY:
            out.append(path)
    return out


_adapters: dict = {}


def _adapter(target):
    if target not in _adapters:
        try:
            _adapters[target] = prepare(resolve(target))
        except ResumefuzzError as exc:
            _adapters[target] = exc
    return _adapters[target]


SELECTED = _selected()


# No entry for this environment means no test here (not a skipped one: an adapter environment
# turns skips into failures, and a framework with nothing in the corpus has nothing to replay).
if SELECTED:

    @pytest.mark.slow
    @pytest.mark.parametrize("path", SELECTED,
                             ids=lambda p: str(p.relative_to(ROOT / "corpus")))
    def test_entry_replays_with_its_recorded_status(path):
        trace = load_trace(path)  # a malformed entry fails here, naming the field
        adapter = _adapter(trace.target)
        if isinstance(adapter, Exception):
            if ONLY is not None or trace.target.startswith(BUILT_IN):
                raise adapter
            pytest.skip(f"{trace.target} is not installed in this environment: {adapter}")
        recorded = trace.status or "FAILED"
        replayer = Replayer(op_timeout=120, adapters={trace.target: adapter})
        trials = 5 if trace.finding and "timing-dependent" in trace.finding.detail else 1
        seen = []
        for _ in range(trials):
            result = replayer.replay(path)
            seen.append(result.status)
            if result.status == recorded:
                return
        assert False, (f"{path.relative_to(ROOT)}: recorded {recorded} "
                       f"({trace.finding.category if trace.finding else 'no finding'}), replay now "
                       f"says {', '.join(seen)}: {result.detail}")
