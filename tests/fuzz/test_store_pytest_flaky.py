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
