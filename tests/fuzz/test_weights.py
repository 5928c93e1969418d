"""``Tuning.weights`` and ``Tuning.op_timeout``: what the generator draws and how long an
operation may take, per variant."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.protocol import Tuning
from fuzz.machine import _weighted


def test_weights_repeat_options_in_order():
    strategy = _weighted(Tuning(weights={"kind:sigkill": 3}).weights, "kind",
                         {"exception", "sigkill"})
    assert list(strategy.elements) == ["exception", "sigkill", "sigkill", "sigkill"]
    assert list(_weighted(Tuning().weights, "kind", {"sigkill", "exception"}).elements) == [
        "exception", "sigkill"]


def test_weighted_draws_are_common():
    seen: Counter = Counter()
    weights = Tuning(weights={"phase:after_commit": 4}).weights

    @settings(max_examples=300, database=None)
    @given(st.data())
    def draw(data):
        seen[data.draw(_weighted(weights, "phase", {"before_effect", "in_flight", "after_commit"}))] += 1

    draw()
    assert seen["after_commit"] > seen["before_effect"] and seen["after_commit"] > seen["in_flight"]


def test_a_variant_op_timeout_extends_but_never_shortens(tmp_path):
    from adapters.reference import ReferenceAdapter
    from fuzz.runner import Session, Settings
    from refmodel import Workflow

    class Slow(ReferenceAdapter):
        def tuning(self, variant):
            return Tuning(op_timeout=90.0)

    adapter = Slow()
    variant = adapter.variants()[0]
    short = Session(adapter, variant, tmp_path / "a", Settings(op_timeout=30.0))
    assert short.case(Workflow(1)).timeout == 90.0
    long = Session(adapter, variant, tmp_path / "b", Settings(op_timeout=120.0))
    assert long.case(Workflow(1)).timeout == 120.0
