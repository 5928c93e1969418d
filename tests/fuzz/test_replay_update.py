"""``replay --update`` records only what reached the finding (``fuzz.replay.reached``): a replay
that diverged at an earlier step than the recorded one never got there, and says nothing."""

from argparse import Namespace

import pytest

from fuzz.cli import _replay_all
from fuzz.rate import Rate
from fuzz.replay import ReplayResult, reached
from fuzz.trace import Finding, Trace, dump_trace, load_trace
from refmodel import Resume, Start, Workflow

WF = Workflow(2, {1}, ("a", "b"))


def entry(tmp_path, reproduced=None, status="FAILED"):
    path = tmp_path / "e.json"
    ops = (Start("t0"), Resume("t0", value="a"), Resume("t0", value="b"))
    finding = Finding("DoubleConsume", "CO", 2, "why", reproduced=reproduced)
    dump_trace(Trace(WF, ops, finding=finding, status=status), path)
    return path


class Scripted:
    def __init__(self, *results):
        self.results = list(results)

    def replay(self, path):
        status, step = self.results.pop(0)
        return ReplayResult(str(path), status, "DoubleConsume", None, "", step=step)


def update(path, *results, trials=None):
    args = Namespace(trials=trials or len(results), mark_timing=False, update=True,
                     relabel=False, retire=False)
    replayer = Scripted(*results)
    _replay_all(args, [path], replayer, [])
    assert not replayer.results, "every scripted replay is used"
    return load_trace(path).status


@pytest.mark.parametrize("status, step, counts", [
    ("ERROR", None, False), ("CHANGED", 1, False), ("CHANGED", 2, True), ("CHANGED", 3, True),
    ("FIXED", None, True), ("FAILED", 2, True)])
def test_reached(tmp_path, status, step, counts):
    assert reached(load_trace(entry(tmp_path)), status, step) is counts


def test_an_early_divergence_is_not_recorded(tmp_path):
    path = entry(tmp_path)
    assert update(path, ("CHANGED", 1)) == "FAILED"
    assert update(path, ("CHANGED", 0), ("ERROR", None)) == "FAILED"


def test_a_change_at_the_finding_is_recorded_and_an_early_one_is_left_out(tmp_path):
    path = entry(tmp_path)
    assert update(path, ("CHANGED", 1), ("FIXED", None)) == "FIXED"
    path = entry(tmp_path)
    assert update(path, ("CHANGED", 2)) == "CHANGED"


def test_a_timing_dependent_entry_is_replayed_at_its_rate_before_its_status_is_written(tmp_path):
    # CrewAI checkpoint-sqlite-kickoff/StateMismatch-db3741948fd0 (6 of 14): one FIXED replay
    # of `replay --update` wrote FIXED.  Now it gets replays_for(entry) replays, as the nightly
    # run and the regression test give it, and FIXED only if none of them fails.
    from fuzz.corpus import replays_for

    rate = Rate(6, 14)
    n = replays_for(load_trace(entry(tmp_path, rate)))
    assert n > 1
    path = entry(tmp_path, rate)
    assert update(path, *[("FIXED", None)] * (n - 1), ("FAILED", 2), trials=1) == "FAILED"
    path = entry(tmp_path, rate)
    assert update(path, *[("FIXED", None)] * n, trials=1) == "FIXED"
    with pytest.raises(IndexError):  # one replay is not enough: it asks for n
        update(entry(tmp_path, rate), ("FIXED", None), trials=1)


def test_a_fixed_entry_whose_finding_comes_back_at_all_is_failed_again(tmp_path):
    # LangGraph sqlite-func-sync-head-update/StateMismatch-d61237a98dcb, recorded FIXED at 1 of
    # 14: once a SIGKILL froze every thread at the crash point, it came back 6 times in 30, and
    # `--update` kept FIXED because FIXED came up too.  A finding that came back is a finding.
    from fuzz.corpus import replays_for

    rate = Rate(1, 14)
    n = replays_for(load_trace(entry(tmp_path, rate, "FIXED")))
    path = entry(tmp_path, rate, "FIXED")
    assert update(path, *[("FIXED", None)] * (n - 1), ("FAILED", 2), trials=1) == "FAILED"
    path = entry(tmp_path, rate, "FIXED")
    assert update(path, *[("FIXED", None)] * n, trials=1) == "FIXED"


class Judged(Scripted):
    """Replays that found the finding with a verdict (and a citation for a D)."""

    def replay(self, path):
        from fuzz.judge import TraceVerdict

        status, step, verdict, citation = self.results.pop(0)
        judged = TraceVerdict(first_divergence_index=step, divergence=None, verdict=verdict,
                              citation=citation)
        return ReplayResult(str(path), status, "DoubleConsume", "DoubleConsume", "",
                            verdict=verdict, step=step, judged=judged)


def test_update_records_the_verdict_the_code_gives_now(tmp_path):
    # LangGraph func-command/PrefixReplay-0216fd7f2d2b and two LlamaIndex StateMismatch entries
    # kept the ✗ they were recorded with after a deviation that covers them was declared: the
    # matrix said ✗ where the code says D.
    path = entry(tmp_path)
    run = Namespace(trials=2, mark_timing=False, update=True, relabel=False, retire=False)
    _replay_all(run, [path], Judged(("FAILED", 2, "D", "docs: x"), ("FAILED", 2, "D", "docs: x")),
                [])
    finding = load_trace(path).finding
    assert (finding.verdict, finding.citation) == ("D", "docs: x")
    # Back to ✗ (a deviation narrowed), and never from trials that disagree.
    _replay_all(run, [path], Judged(("FAILED", 2, "✗", ""), ("FAILED", 2, "✗", "")), [])
    assert load_trace(path).finding.verdict == "✗"
    _replay_all(run, [path], Judged(("FAILED", 2, "D", "docs: x"), ("FAILED", 2, "✗", "")), [])
    assert load_trace(path).finding.verdict == "✗"
