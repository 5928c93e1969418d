"""Each mutant's minimal counterexample is found, and labelled with its own category."""

import pytest

from refmodel import MUTANTS, Workflow, explore_reference, shortest_exposure

WF = Workflow(3, {2}, ("a", "b"))

# The shortest traces for the default configuration, as the contract's section 5 shapes them.
MINIMAL = {"Replay": 2, "ForkIgnore": 3, "InvalidPersist": 1, "NondetRecovery": 2,
           "DoubleConsume": 3, "PrefixReplay": 2, "LostUpdate": 2, "Stuck": 2,
           "StateMismatch": 2}


@pytest.mark.parametrize("mutant", MUTANTS)
def test_mutant_is_exposed_and_labelled_with_its_own_category(mutant):
    exposure = shortest_exposure(WF, mutant, depth=3)
    assert exposure is not None, f"{mutant} not exposed within depth 3"
    assert exposure.divergence.category == mutant
    assert exposure.length == MINIMAL[mutant]


def test_reference_never_diverges_from_itself():
    assert shortest_exposure(WF, None, depth=3) is None


def test_reference_state_counts_are_stable():
    # 10, not 8: a crash after task 1 (before the gate) may leave either label (docs/contract.md
    # §3); 118, not 116: so may a crash as recovery enters the pending gate again.
    assert explore_reference(WF, 2) == [10, 118]


def test_every_mutant_has_a_shape_in_the_contract():
    assert set(MINIMAL) == set(MUTANTS)
