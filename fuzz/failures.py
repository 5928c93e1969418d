"""One failure class per fault category, so that shrinking cannot slide from one to another.

Hypothesis tells bugs apart by exception type and the line that raised it: each class here is
raised from exactly one place (``machine.DifferentialMachine._check``), so a shrink that started
from a Replay stays a Replay.  The classes carry the divergence and the history that led to it.
"""

from __future__ import annotations

from refmodel import CATEGORY_INFO


class Failure(AssertionError):
    """A divergence between a target and the reference model."""

    category = ""

    def __init__(self, message: str, *, history=(), divergence=None, verdict="✗", citation="",
                 workflow=None, owner="framework"):
        super().__init__(message)
        self.workflow = workflow
        self.history = list(history)  # [(op, observed, allowed observations)]
        self.divergence = divergence
        self.verdict = verdict
        self.citation = citation
        self.owner = owner  # docs/contract.md §5 "Whose defect": "framework", or "caller" for a D

    @property
    def property(self) -> str:
        return CATEGORY_INFO[self.category].breaks


# One class per category of ``refmodel.CATEGORIES``, written out so that each can be found by
# its name (tests/fuzz/test_judge.py checks that the two lists agree).


class ReplayFailure(Failure):
    """Replay (R1, breaks EO): recover restarts at the last completed task, not after it."""

    category = "Replay"


class ForkIgnoreFailure(Failure):
    """ForkIgnore (R2, breaks FD): a fork of an answered gate keeps the source's answer."""

    category = "ForkIgnore"


class InvalidPersistFailure(Failure):
    """InvalidPersist (R3, breaks CV): persists a task's out-of-schema output, and uses tampered
    state silently."""

    category = "InvalidPersist"


class NondetRecoveryFailure(Failure):
    """NondetRecovery (R4, breaks RD): the second copy of a twin recovery re-runs the last task."""

    category = "NondetRecovery"


class DoubleConsumeFailure(Failure):
    """DoubleConsume (R5, breaks CO): a resume with nothing pending re-consumes the last gate,
    and a stale handle's checkpoint is resumed again."""

    category = "DoubleConsume"


class PrefixReplayFailure(Failure):
    """PrefixReplay (R9, breaks EO): a resume re-runs every completed task first."""

    category = "PrefixReplay"


class LostUpdateFailure(Failure):
    """LostUpdate (R11, breaks CO): every racer consumes the pending interrupt."""

    category = "LostUpdate"


class StuckFailure(Failure):
    """Stuck (R6, breaks LV): recovery after a SIGKILL inside a task is refused."""

    category = "Stuck"


class StateMismatchFailure(Failure):
    """StateMismatch (-, breaks PC): a resume persists the next value in line as the gate's
    answer."""

    category = "StateMismatch"


class UnclassifiedFailure(Failure):
    """Unclassified (-, breaks -): (no mutant: a gap in the model or the adapter)."""

    category = "Unclassified"


FAILURES: dict[str, type[Failure]] = {cls.category: cls for cls in (
    ReplayFailure,
    ForkIgnoreFailure,
    InvalidPersistFailure,
    NondetRecoveryFailure,
    DoubleConsumeFailure,
    PrefixReplayFailure,
    LostUpdateFailure,
    StuckFailure,
    StateMismatchFailure,
    UnclassifiedFailure,
)}

__all__ = ["FAILURES", "Failure", *(cls.__name__ for cls in FAILURES.values())]
