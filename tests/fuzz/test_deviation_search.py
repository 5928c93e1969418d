"""Machine level: a documented deviation (D) does not end the search (docs/contract.md §5).

The target is the reference with two planted defects.  A resume persists the next value in line
as the gate's answer (the StateMismatch switch), which the adapter *documents* (a D).  And a
resume with nothing pending consumes the last gate again (the DoubleConsume switch), but only on
a thread whose store already holds such a misrecorded answer: every example that reaches the
DoubleConsume went through the D first (a fork's branch consumed its gate without one, so it
has no marker).  A machine that ended the example at the D, or judged what follows against the
reference's canonical branch instead of the adopted one, could not report the DoubleConsume as ✗.
"""

from pathlib import Path

import pytest

from adapters.protocol import Deviation, Resume
from adapters.reference import ReferenceAdapter, ReferenceCase
from adapters.reference.store import Store
from fuzz.campaign import CampaignOptions, run_campaign
from fuzz.replay import Replayer
from fuzz.targets import prepare

pytestmark = pytest.mark.slow

MISRECORD = Deviation("StateMismatch", "test: a resume records the next value in line",
                      "any resume or racer", ops=frozenset({"resume", "race"}))


class _MarkingStore(Store):
    """Leaves a marker beside a thread once a resume has committed a (misrecorded) answer; the
    marker is a file of the store, so a twin copy carries it too."""

    resuming = False

    def write(self, thread, durable, seq):
        super().write(thread, durable, seq)
        if self.resuming and durable.answers:
            self.path(thread, "misrecorded").touch()


class _Case(ReferenceCase):
    def __init__(self, workflow, workdir, documented):
        super().__init__(workflow, workdir, None)
        self.store = _MarkingStore(workdir, workflow)
        self.documented = documented
        self._op = None

    def run(self, op, hooks):
        self._op, self.store.resuming = op, isinstance(op, Resume)
        return super().run(op, hooks)

    def _on(self, switch):
        if switch == "StateMismatch":
            return True
        if switch == "DoubleConsume" and isinstance(self._op, Resume):
            return self.store.path(self._op.thread, "misrecorded").exists()
        return False


class _Target(ReferenceAdapter):
    def __init__(self, documented: bool):
        super().__init__()
        self.documented = documented
        self.name = "test:misrecord-then-double-consume"

    def deviations(self, variant):
        return [MISRECORD] if self.documented else []

    def open(self, variant, workflow, workdir):
        return _Case(workflow, Path(workdir), self.documented)


def _campaign(adapter, tmp_path, examples):
    options = CampaignOptions(max_examples=examples, seed=3, profile="ci", mode="inprocess",
                              corpus_dir=tmp_path / "corpus", reports_dir=tmp_path / "reports",
                              workdir=tmp_path / "work")
    (result,) = run_campaign(prepare(adapter), list(adapter.variants()), options)
    return result


def test_a_defect_after_a_documented_deviation_is_found_as_a_defect(tmp_path):
    adapter = _Target(documented=True)
    result = _campaign(adapter, tmp_path, examples=400)
    defects = [f for f in result.findings if f.category == "DoubleConsume"]
    assert defects, f"no DoubleConsume after the D in {result.examples} examples: {result.findings}"
    assert all(f.verdict == "✗" for f in defects)
    # The misrecord is never a ✗: only the documented deviation, or the DoubleConsume.
    assert {(f.category, f.verdict) for f in result.findings} <= {("DoubleConsume", "✗"),
                                                                   ("StateMismatch", "D")}
    # The witness goes through the D first: judged again, a D precedes the ✗.
    replayed = Replayer(adapters={adapter.name: adapter}).replay(Path(defects[0].corpus))
    assert replayed.status == "FAILED" and replayed.verdict == "✗"
    verdict = replayed.judged
    assert verdict.deviations_seen, "the witness met no documented deviation before its ✗"
    assert all(d.index < verdict.first_divergence_index and d.divergence.category ==
               "StateMismatch" for d in verdict.deviations_seen)


def test_without_the_citation_the_misrecord_is_the_defect(tmp_path):
    # The control: the same target without its Deviation stops at the misrecorded answer.
    result = _campaign(_Target(documented=False), tmp_path, examples=100)
    assert {(f.category, f.verdict) for f in result.findings} == {("StateMismatch", "✗")}
