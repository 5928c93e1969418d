"""What to keep when Hypothesis calls a run flaky.

Two kinds of flakiness reach us from a target that races or writes in the background:

- ``FlakyFailure``: an example failed, and failed otherwise (or not at all) when Hypothesis ran it
  again.  The failure it carries is a finding whose rate is not 1.
- ``Flaky`` ("Inconsistent data generation"): the re-run drew other data.  The machine draws its
  next op from the world the observed outcome selected, so a race that went another way on the
  re-run draws other ops.  The failure of the first run is not in the exception; ``Best``
  remembers it.

Either way a failure that was raised once is a finding, kept as timing-dependent (its rate is
measured before it is kept, docs/contract.md §6).  Used by the campaign and the pytest plugin alike.
"""

from __future__ import annotations

from hypothesis.errors import Flaky, FlakyFailure

from ..failures import Failure


class Best:
    """The smallest failure one run has raised so far: what a shrink cut short, or a run that
    Hypothesis called flaky, keeps.  (Every candidate the shrinker accepts raised a failure and
    is smaller than the one before.)"""

    def __init__(self):
        self.failure = None

    def offer(self, failure: Failure) -> None:
        if self.failure is None or len(failure.history) <= len(self.failure.history):
            self.failure = failure


def watched(machine, best: Best):
    """``machine`` with every failure it raises offered to ``best`` (re-raised unchanged: the
    traceback still ends on the machine's own raise line, which Hypothesis identifies bugs by)."""

    class Watched(machine):
        def _check(self, op):
            try:
                super()._check(op)
            except Failure as exc:
                best.offer(exc)
                raise

    Watched.__name__ = Watched.__qualname__ = machine.__name__
    return Watched


def kept_failure(exc: Flaky, best: Best) -> Failure | None:
    """The failure to keep from ``exc``, marked timing-dependent; ``None`` when no example failed
    (an example rejected on one run and not on the next: nothing to keep)."""
    failure = None
    if isinstance(exc, FlakyFailure):
        failure = next((e for e in exc.exceptions if isinstance(e, Failure)), None)
    if failure is None:
        failure = best.failure
    if failure is not None:
        failure.timing = True
    return failure
