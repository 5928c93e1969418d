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
fork workers.

A finding that came back in only k of n replays after its campaign (``finding.reproduced``, a
timing-dependent finding) is a finding, kept with its rate, and replayed here in ``trials_for``
trials: enough that, at the recorded rate, its status fails to come up in all of them with
probability below ``FALSE_ALARM`` (at most ``MAX_TRIALS``).  It passes when its recorded status
comes up at least once.  The rate was measured on some other machine under some other load, so
one that misses all its trials gets more, up to ``MAX_TRIALS`` in all, before it fails (a
release fixed it, or it now diverges otherwise): a ✗ cell's evidence is not dropped because
CI's machine was quieter than the campaign's.  An entry recorded FIXED whose finding came back in
k of n replays is judged the same way, at the rate of the fix, (n - k) / n (``replays_for``).  An
entry that reproduced every time is replayed
once; a few still ride on a free race or a framework's background writer, so one whose replay
differs is replayed twice more (further replays run several in a row in each of a few
interpreters, as `replay --trials` does: some findings need a process with a history, and every
second interpreter runs a full garbage collection before each operation, see ``_replay_more``):
it fails when its recorded status comes back in none of the
three replays.  A replay that could not be judged (``ERROR``) or that diverged before the recorded
step (another behaviour, timing-dependent, took the run elsewhere first: it never got to the
finding) says nothing about the finding, so another replay is run in its place, up to
``MAX_TRIALS`` in all (``reached``); the failure message counts them.
"""

import itertools
import json
import os
import subprocess
import sys
import warnings
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fuzz.corpus import entries, replays_for, trials_for
from fuzz.errors import ResumefuzzError
from fuzz.rate import FALSE_ALARM, MAX_TRIALS, Rate
from fuzz.replay import reached as replay_reached
from fuzz.targets import known_targets, prepare, resolve_registered
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
REPLAY_JOBS = max(1, int(os.environ.get("RESUMEFUZZ_REPLAY_JOBS", "4")))  # see `replays`
# A timing-dependent entry's further replays are asked for this many at a time (`check_replays`):
# a hang it records costs the op time limit (120 s) per replay.
MORE_AT_ONCE = 8


def _store(trace) -> str | None:
    return trace.versions.get("store-factory")


def _selected():
    """(entries replayed here, Counter of the targets whose entries are not)."""
    out, elsewhere = [], Counter()
    for path in entries(None, ROOT / "corpus"):
        try:
            trace = load_trace(path)
        except ResumefuzzError:
            out.append(path)  # a malformed entry must fail loudly below
            continue
        store = _store(trace)
        if (store not in STORES_HERE) if store is not None else STORES_ONLY:
            continue  # replayed where the environment names the store factory (see above)
        target = trace.target
        if ONLY is not None:
            if target == ONLY:
                out.append(path)
        elif target.startswith(BUILT_IN) or _framework_here(target):
            out.append(path)
        else:
            elsewhere[target] += 1
    return out, elsewhere


def _replay_args(paths, store: str | None) -> list:
    return [sys.executable, "-m", "fuzz.cli", "replay", "--json", "--op-timeout", "120",
            *(["--store", store] if store else []), *map(str, paths)]


# The collector's phase in which a further replay's interpreter forks its workers: how many
# young-generation collections it runs first (a worker inherits the counters that say when the
# next older collection comes).  An interpreter's allocations are the same every time
# (PYTHONHASHSEED=0), so without this every further replay of an entry repeats the same few
# histories, and a finding that needs a collection at one moment is seen in all of them or in
# none (LlamaIndex's idle run lost to the collector, ``server-event/Stuck-bddff149f8ee``: 0 of
# 30 further replays in CI after an unrelated change moved the allocations; 1 of the 10 phases
# shows it on the code of that change).  The interpreters of successive asks take successive
# phases, round the ten the middle generation's threshold allows.
PHASED = ("import gc, runpy, sys; [gc.collect(0) for _ in range(int(sys.argv.pop(1)))]; "
          "runpy.run_module('fuzz.cli', run_name='__main__', alter_sys=True)")
_phases = itertools.count()


def _phased_args(paths, store: str | None, phase: int, collect: bool = False) -> list:
    """``_replay_args``, its interpreter first running ``phase`` young collections; with
    ``collect``, its workers run a full collection before each operation."""
    python, _, _, *rest = _replay_args(paths, store)
    return [python, "-c", PHASED, str(phase), *rest, *(["--collect-garbage"] if collect else [])]


@pytest.fixture(scope="module")
def replays():
    """Replay every selected entry whose target is installed, in one fresh interpreter: once, or
    ``replays_for(...)`` times for a timing-dependent one.  ``{path: [result, ...]}``."""
    by_store: dict = {}
    for p in SELECTED:
        try:
            trace = load_trace(p)
        except ResumefuzzError:
            continue  # fails in its own test, naming the field
        by_store.setdefault(_store(trace), []).extend([p] * replays_for(trace))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def run(job):
        store, paths = job
        return subprocess.run(_replay_args(paths, store), cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=3000)

    # One `replay` per store factory (--store X), each split round-robin over REPLAY_JOBS
    # interpreters run at once: an entry's trials land in different ones, so the waits some
    # replays sit out (a server's 30 s grace, an op that hangs until its timeout) overlap
    # instead of adding up.  Every case still runs in its own worker, its own store.
    jobs = [(store, paths[i::REPLAY_JOBS]) for store, paths in by_store.items()
            for i in range(min(REPLAY_JOBS, len(paths)))]
    out: dict = {}
    with ThreadPoolExecutor(REPLAY_JOBS) as pool:
        for proc in pool.map(run, jobs):
            assert proc.returncode in (0, 1), proc.stderr[-3000:]
            for r in json.loads(proc.stdout):
                out.setdefault(Path(r["path"]).resolve(), []).append(r)
    return out


def _replay_more(path: Path, count: int) -> list:
    """``count`` more replays of one entry, in REPLAY_JOBS interpreters at once, each replaying it
    several times in a row (as ``replay --trials`` does).  Not one fresh interpreter per replay:
    some findings need the history of a process that has run before, as a long-lived server's
    has.  LlamaIndex's ``server-event/Stuck-bddff149f8ee`` is lost to a garbage collection that
    runs between the run's pause and its answer; when the collector runs follows the worker's
    allocations, which a fresh interpreter's first replay never reaches (0 of 28 in CI, 2026-12-04)
    and a later replay in the same interpreter may; each interpreter starts in a collection
    phase of its own (``PHASED``).  Even so, that history is the interpreter's, and a change of
    ours moves it: 0 of 60 in one CI run of 2026-12-06.  So every second interpreter replays
    with ``--collect-garbage`` (a full collection in the worker before each operation, where a
    real process may collect at any moment): a finding a collection exposes shows there without
    relying on the history (that entry: 3 of 3 with it, 1 of 3 without, 2026-12-06).  Its
    results say so (``collected``)."""
    store = _store(load_trace(path))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    shares = [count // REPLAY_JOBS + (i < count % REPLAY_JOBS) for i in range(REPLAY_JOBS)]

    def run(job: tuple) -> list:
        share, phase, collect = job
        proc = subprocess.run(_phased_args([path] * share, store, phase, collect), cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=600 * share)
        assert proc.returncode in (0, 1), proc.stderr[-3000:]
        return [{**r, "collected": collect} for r in json.loads(proc.stdout)]

    jobs = [(n, next(_phases) % 10, i % 2 == 1) for i, n in enumerate(shares) if n]
    with ThreadPoolExecutor(REPLAY_JOBS) as pool:
        return [r for results in pool.map(run, jobs) for r in results]


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


def test_the_committed_corpus_keeps_one_witness_per_defect():
    # What `resumefuzz dedupe` (and the nightly) would remove: an entry of a defect another
    # entry shows the same way, shorter.  A campaign run by hand adds such entries; committing
    # them without `resumefuzz dedupe --apply` fails here (2026-12-05: eight had been).
    from fuzz.corpus import duplicates

    pairs = duplicates(entries(None, ROOT / "corpus"))
    assert not pairs, "redundant corpus entries (run resumefuzz dedupe --apply): " + "; ".join(
        f"{r.relative_to(ROOT)} (kept {k.relative_to(ROOT)})" for r, k in pairs)


# No entry for this environment means no test here (not a skipped one: an adapter environment
# turns skips into failures, and a framework with nothing in the corpus has nothing to replay).
if SELECTED:

    @pytest.mark.slow
    @pytest.mark.parametrize("path", SELECTED,
                             ids=lambda p: str(p.relative_to(ROOT / "corpus")))
    def test_entry_replays_with_its_recorded_status(path, replays):
        trace = load_trace(path)  # a malformed entry fails here, naming the field
        results = replays.get(path.resolve())
        assert results is not None, f"{path}: selected here, yet the replay did not report it"
        check_replays(trace, str(path.relative_to(ROOT)), results,
                      lambda count: _replay_more(path, count))


def reached(trace, result: dict) -> bool:
    """Does this replay (``replay --json``) say anything about the entry's finding?
    (``fuzz.replay.reached``: not an ``ERROR``, nor a ``CHANGED`` before the recorded step.)"""
    return replay_reached(trace, result["status"], result.get("step"))


def check_replays(trace, name: str, results: list, again) -> None:
    """Fail unless the entry's recorded status came up: in one of three replays that reached its
    finding (an entry that reproduced every time), or in any of its trials or of the further ones
    that make them ``MAX_TRIALS`` (a timing-dependent entry).  Replays that did not reach it
    (``reached``) are no evidence either way: more are run in their place, ``MAX_TRIALS`` in all
    at most.  ``again(count)`` replays ``count`` more."""
    recorded = trace.status or "FAILED"
    seen = list(results)

    def missed() -> bool:
        return all(r["status"] != recorded for r in seen)

    if replays_for(trace) == 1:
        while missed() and len(seen) < MAX_TRIALS:
            told = sum(reached(trace, r) for r in seen)
            if told >= 3:
                break
            seen.extend(again(min(3 - told, MAX_TRIALS - len(seen))))
    else:  # in batches: once the status came up, the rest would only sit out op time limits
        while missed() and len(seen) < MAX_TRIALS:
            seen.extend(again(min(MORE_AT_ONCE, MAX_TRIALS - len(seen))))
    statuses = [r["status"] for r in seen]
    rate = f", recorded rate {trace.finding.rate}" if replays_for(trace) > 1 else ""
    short = sum(not reached(trace, r) for r in seen)
    collected = sum(bool(r.get("collected")) for r in seen)
    assert recorded in statuses, (
        f"{name}: recorded {recorded} "
        f"({trace.finding.category if trace.finding else 'no finding'}{rate}), "
        f"{len(seen)} replays now say {', '.join(statuses)}"
        + (f" ({short} of them never reached the finding)" if short else "")
        + (f" ({collected} of them with --collect-garbage)" if collected else "")
        + f": {seen[-1]['detail']}")


# -- the check itself can fail ----------------------------------------------------------------


def _entry(reproduced, step=0):
    from fuzz.trace import Finding, Trace
    from refmodel import Start, Workflow

    finding = Finding("Replay", "EO", step, "why", reproduced=reproduced)
    return Trace(Workflow(1, frozenset(), ("a",)), (Start("t0"),), finding=finding,
                 status="FAILED")


def test_trials_follow_the_recorded_rate():
    assert trials_for(None) == 1 and trials_for(Rate(5, 5)) == 1
    assert trials_for(Rate(1, 2)) == 7  # 0.5 ** 7 < 1 %
    assert trials_for(Rate(1, 5)) == 21  # 0.8 ** 21 < 1 %
    assert trials_for(Rate(1, 100)) == MAX_TRIALS
    for k, n in ((1, 2), (2, 3), (3, 5), (1, 5)):
        assert (1 - k / n) ** trials_for(Rate(k, n)) <= FALSE_ALARM
    # The cap still sees a finding whose rate is 4.6 % (LangGraph's SIGKILL loss comes back in
    # 7-11 % of replays, lower than the campaigns measured it) at the false-alarm rate.
    assert (1 - 0.046) ** MAX_TRIALS <= FALSE_ALARM


def test_a_timing_dependent_entry_passes_once_seen_and_fails_when_never():
    flaky = _entry(Rate(2, 5))
    fixed, failed = {"status": "FIXED", "detail": "-"}, {"status": "FAILED", "detail": "-"}
    never = lambda count: pytest.fail("seen in its own trials: no more replays")  # noqa: E731
    check_replays(flaky, "e", [fixed] * 9 + [failed], never)
    asked = []
    with pytest.raises(AssertionError, match=rf"recorded rate 2/5\), {MAX_TRIALS} replays now say FIXED"):
        check_replays(flaky, "e", [fixed] * 10, lambda count: asked.append(count) or [fixed] * count)
    assert sum(asked) == MAX_TRIALS - 10 and max(asked) <= MORE_AT_ONCE
    asked.clear()  # once the status comes up, no more are asked for
    check_replays(flaky, "e", [fixed] * 10,
                  lambda count: asked.append(count) or [fixed] * (count - 1) + [failed])
    assert asked == [MORE_AT_ONCE]


def test_a_timing_dependent_entry_that_missed_its_trials_gets_more():
    # The rate came from a loaded machine; a quieter one may need more trials to show it.
    flaky = _entry(Rate(5, 6))
    fixed, failed = {"status": "FIXED", "detail": "-"}, {"status": "FAILED", "detail": "-"}
    check_replays(flaky, "e", [fixed] * 3, lambda count: [fixed] * (count - 1) + [failed])


def test_a_timing_dependent_entry_recorded_fixed_gets_trials_at_the_rate_of_its_fix():
    # llamaindex server-event/Stuck-bddff149f8ee (Stuck in 2 of 3 replays, recorded FIXED) came
    # back FAILED in all of its three replays on a loaded machine: at its own rate, FIXED shows
    # in one replay of three, so three say nothing.
    entry = _entry(Rate(2, 3)).with_(status="FIXED")
    assert replays_for(entry) == trials_for(Rate(1, 3)) > 3
    fixed, failed = {"status": "FIXED", "detail": "-"}, {"status": "FAILED", "detail": "-"}
    never = lambda count: pytest.fail("seen in its own trials: no more replays")  # noqa: E731
    check_replays(entry, "e", [failed] * (replays_for(entry) - 1) + [fixed], never)
    with pytest.raises(AssertionError, match=rf"{MAX_TRIALS} replays now say FAILED"):
        check_replays(entry, "e", [failed] * replays_for(entry), lambda count: [failed] * count)
    # A finding that came back rarely is fixed in most replays: two of them judge it.
    assert replays_for(_entry(Rate(1, 14)).with_(status="FIXED")) == 2


def test_a_deterministic_entry_is_retried_twice_then_fails():
    fixed = {"status": "FIXED", "detail": "-"}
    calls = []
    with pytest.raises(AssertionError, match="3 replays now say FIXED, FIXED, FIXED"):
        check_replays(_entry(None), "e", [fixed], lambda count: calls.append(count) or [fixed])
    assert len(calls) == 2


def _result(status, step=None):
    return {"status": status, "detail": "-", "step": step}


def test_a_replay_that_diverged_before_the_finding_is_replaced_by_another():
    # CrewAI, CI: an earlier step's checkpoint writes raced (CHANGED at step 2, the finding is
    # at step 3) in two replays, and the ones after could not be judged until one reached it.
    entry = _entry(None, step=2)
    early, error, failed = _result("CHANGED", 1), _result("ERROR"), _result("FAILED", 2)
    batches = [[error] * 3, [failed] * 3]  # what each call of ``again`` returns, in turn
    check_replays(entry, "e", [early, early], lambda count: batches.pop(0)[:count])
    assert not batches


def test_replays_that_never_reach_the_finding_fail_after_max_trials():
    entry = _entry(None, step=2)
    early = _result("CHANGED", 1)
    asked = []
    with pytest.raises(AssertionError, match=rf"{MAX_TRIALS} replays now say CHANGED.*"
                                             rf"\({MAX_TRIALS} of them never reached the finding\)"):
        check_replays(entry, "e", [early], lambda count: asked.append(count) or [early] * count)
    assert sum(asked) == MAX_TRIALS - 1


def test_a_change_at_the_findings_step_counts_as_evidence():
    entry = _entry(None, step=2)
    there = _result("CHANGED", 2)
    with pytest.raises(AssertionError, match="3 replays now say CHANGED, CHANGED, CHANGED:"):
        check_replays(entry, "e", [there], lambda count: [there] * count)


def test_a_phased_interpreter_runs_the_replay_command():
    proc = subprocess.run(_phased_args([], None, 3)[:4] + ["replay", "--help"], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True)
    assert proc.returncode == 0 and "--op-timeout" in proc.stdout, proc.stderr[-2000:]


def test_every_second_further_interpreter_collects_garbage(tmp_path, monkeypatch):
    from fuzz.trace import Trace, dump_trace
    from refmodel import Resume, Start, Workflow

    path = tmp_path / "entry.json"  # on the reference, no finding: FIXED
    dump_trace(Trace(workflow=Workflow(n=2, gates=(1,), values=("a", "b")),
                     operations=(Start("t0"), Resume("t0", value="a"))), path)
    monkeypatch.setattr(sys.modules[__name__], "REPLAY_JOBS", 2)
    results = _replay_more(path, 4)
    assert [r["collected"] for r in results] == [False, False, True, True]
    assert {r["status"] for r in results} == {"FIXED"}, results
