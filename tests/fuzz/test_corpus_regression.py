"""The corpus as regression tests: every entry replays with the status it recorded.

An entry is replayed when its target is installed in this environment: the built-in targets in
the `core` environment, one framework's entries in that framework's `adapter-<framework>`
environment (named by RESUMEFUZZ_SMOKE_TARGET).  A replay whose status differs from the recorded
one fails, saying what changed; a framework release that fixed a behaviour shows up here first.

The replays run as `resumefuzz replay --json` in a fresh interpreter: this test process may have
run framework code already (an adapter's in-process tests), and a parent with threads must not
fork workers.

A finding that came back in only k of n replays after its campaign (``finding.reproduced``, a
timing-dependent finding) is a finding, kept with its rate, and replayed here in ``trials_for``
trials: enough that, at the recorded rate, its status fails to come up in all of them with
probability below ``FALSE_ALARM`` (at most ``MAX_TRIALS``).  It passes when its recorded status
comes up at least once, and fails when it never does (a release fixed it, or it now diverges
otherwise).  An entry that reproduced every time is replayed once; a few still ride on a free
race or a framework's background writer, so one whose replay differs is replayed twice more: it
fails when its recorded status comes back in none of the three replays.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz.corpus import FALSE_ALARM, MAX_TRIALS, entries, replays_for, trials_for
from fuzz.errors import ResumefuzzError
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


def _installed(target: str) -> bool:
    try:
        resolve(target)
        return True
    except ResumefuzzError:
        return False


@pytest.fixture(scope="module")
def replays():
    """Replay every selected entry whose target is installed, in one fresh interpreter: once, or
    ``replays_for(...)`` times for a timing-dependent one.  ``{path: [result, ...]}``."""
    paths = []
    for p in SELECTED:
        try:
            trace = load_trace(p)
        except ResumefuzzError:
            continue
        if ONLY is not None or trace.target.startswith(BUILT_IN) or _framework_here(trace.target):
            paths += [str(p)] * replays_for(trace)
    if not paths:
        return {}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "fuzz.cli", "replay", "--json",
                           "--op-timeout", "120", *paths],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=3000)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    out: dict = {}
    for r in json.loads(proc.stdout):
        out.setdefault(Path(r["path"]).resolve(), []).append(r)
    return out


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
        results = replays.get(path.resolve())
        if results is None:
            pytest.skip(f"{trace.target} is not installed in this environment")
        check_replays(trace, str(path.relative_to(ROOT)), results, lambda: _replay_once(path))


def check_replays(trace, name: str, results: list, again) -> None:
    """Fail unless the entry's recorded status came up: in any of its trials (a timing-dependent
    entry), or in its replay or one of two more (``again()``)."""
    recorded = trace.status or "FAILED"
    seen = list(results)
    if replays_for(trace) == 1:
        while seen[-1]["status"] != recorded and len(seen) < 3:
            seen.append(again())
    statuses = [r["status"] for r in seen]
    rate = f", recorded rate {trace.finding.rate}" if replays_for(trace) > 1 else ""
    assert recorded in statuses, (
        f"{name}: recorded {recorded} "
        f"({trace.finding.category if trace.finding else 'no finding'}{rate}), "
        f"{len(seen)} replays now say {', '.join(statuses)}: {seen[-1]['detail']}")


# -- the check itself can fail ----------------------------------------------------------------


def _entry(reproduced):
    from fuzz.trace import Finding, Trace
    from refmodel import Start, Workflow

    finding = Finding("Replay", "EO", 0, "why", reproduced=reproduced)
    return Trace(Workflow(1, frozenset(), ("a",)), (Start("t0"),), finding=finding,
                 status="FAILED")


def test_trials_follow_the_recorded_rate():
    assert trials_for(None) == 1 and trials_for({"k": 5, "n": 5}) == 1
    assert trials_for({"k": 1, "n": 2}) == 7  # 0.5 ** 7 < 1 %
    assert trials_for({"k": 1, "n": 5}) == 21  # 0.8 ** 21 < 1 %
    assert trials_for({"k": 1, "n": 100}) == MAX_TRIALS
    for k, n in ((1, 2), (2, 3), (3, 5), (1, 5)):
        assert (1 - k / n) ** trials_for({"k": k, "n": n}) <= FALSE_ALARM


def test_a_timing_dependent_entry_passes_once_seen_and_fails_when_never():
    flaky = _entry({"k": 2, "n": 5})
    fixed, failed = {"status": "FIXED", "detail": "-"}, {"status": "FAILED", "detail": "-"}
    never = lambda: pytest.fail("a timing-dependent entry is judged on its own trials")  # noqa: E731
    check_replays(flaky, "e", [fixed] * 9 + [failed], never)
    with pytest.raises(AssertionError, match=r"recorded rate 2/5\), 10 replays now say FIXED"):
        check_replays(flaky, "e", [fixed] * 10, never)


def test_a_timing_dependent_entry_recorded_fixed_is_judged_like_any_other():
    entry = _entry({"k": 1, "n": 14}).with_(status="FIXED")
    assert replays_for(entry) == 1
    failed = {"status": "FAILED", "detail": "-"}
    with pytest.raises(AssertionError, match="3 replays now say FAILED"):
        check_replays(entry, "e", [failed], lambda: failed)


def test_a_deterministic_entry_is_retried_twice_then_fails():
    fixed = {"status": "FIXED", "detail": "-"}
    calls = []
    with pytest.raises(AssertionError, match="3 replays now say FIXED, FIXED, FIXED"):
        check_replays(_entry(None), "e", [fixed], lambda: calls.append(1) or fixed)
    assert len(calls) == 2
