"""``resumefuzz.pytest``: a failure in a run Hypothesis calls flaky (``FlakyFailure``: the example
failed otherwise when run again; ``Flaky``: the re-run drew other ops, as after a race that went
another way) is kept as a timing-dependent finding, as the campaign keeps it; flakiness with no
failure behind it is raised as it is."""

import hypothesis.stateful
import pytest
from hypothesis.errors import Flaky, FlakyFailure

from fuzz.failures import Failure
from resumefuzz.pytest import _run_once


class Machine:
    """A stand-in for a state machine class: ``_check`` is where a divergence is raised."""

    failure = None

    def _check(self, op):
        if self.failure is not None:
            raise self.failure


def test_a_flaky_failure_is_a_timing_dependent_finding(monkeypatch):
    found = Failure("gate 2 consumed 'a'")

    def flaky(machine, settings=None):
        raise FlakyFailure("Inconsistent results", [found])

    monkeypatch.setattr(hypothesis.stateful, "run_state_machine_as_test", flaky)
    assert _run_once(Machine, None) is found and found.timing is True


def test_a_failure_before_inconsistent_data_generation_is_kept(monkeypatch):
    # The first run failed (a race overlapped); its re-run drew other ops and Hypothesis gave up
    # with a bare ``Flaky`` that carries no failure.  The failure seen is still the finding.
    found = Failure("both racers consumed gate 1", history=[("race", "completed|completed", ())])

    class Racing(Machine):
        failure = found

    def flaky(machine, settings=None):
        with pytest.raises(Failure):
            machine()._check("race")
        raise Flaky("Inconsistent data generation! Data generation behaved differently")

    monkeypatch.setattr(hypothesis.stateful, "run_state_machine_as_test", flaky)
    assert _run_once(Racing, None) is found and found.timing is True


def test_other_flakiness_is_raised(monkeypatch):
    def flaky(machine, settings=None):
        raise FlakyFailure("Inconsistent results", [ValueError("not a divergence")])

    monkeypatch.setattr(hypothesis.stateful, "run_state_machine_as_test", flaky)
    with pytest.raises(FlakyFailure):
        _run_once(Machine, None)


def test_inconsistent_data_generation_without_a_failure_is_raised(monkeypatch):
    def flaky(machine, settings=None):
        raise Flaky("Inconsistent data generation!")

    monkeypatch.setattr(hypothesis.stateful, "run_state_machine_as_test", flaky)
    with pytest.raises(Flaky):
        _run_once(Machine, None)


def test_a_clean_run_returns_nothing(monkeypatch):
    monkeypatch.setattr(hypothesis.stateful, "run_state_machine_as_test",
                        lambda machine, settings=None: None)
    assert _run_once(Machine, None) is None


def test_a_free_race_shown_on_the_builtin_saver_under_another_category_is_the_frameworks():
    # docs/examples/test_my_saver.py, CI 2026-12-05: `start; race(b, b)` (unforced) made a
    # DoubleConsume on the example store; the built-in SqliteSaver showed the same trace as a
    # LostUpdate 12 of 12 times, both CO at step 2, and the store was blamed.
    from fuzz.replay import ReplayResult
    from fuzz.trace import Finding, Trace
    from refmodel import Race, Start, Workflow
    from fuzz.baseline import same_defect

    wf = Workflow(4, {2, 4}, ("a", "b"))
    finding = Finding("DoubleConsume", "CO", 1, "gate 4 consumed 'b'")

    def result(status, category, step=1):
        return ReplayResult("x", status, "DoubleConsume", category, "", step=step)

    free = Trace(wf, (Start("t0"), Race("t0", ("b", "b"))), finding=finding)
    assert same_defect(free, result("FAILED", "DoubleConsume")) == ""
    assert "LostUpdate" in same_defect(free, result("CHANGED", "LostUpdate"))
    # Another property, another step, or a forced race (no timing left): the store's.
    assert same_defect(free, result("CHANGED", "StateMismatch")) is None
    assert same_defect(free, result("CHANGED", "LostUpdate", step=0)) is None
    forced = free.with_(operations=(Start("t0"), Race("t0", ("b", "b"), forced=True)))
    assert same_defect(forced, result("CHANGED", "LostUpdate")) is None
    assert same_defect(free, result("FIXED", None, step=None)) is None
