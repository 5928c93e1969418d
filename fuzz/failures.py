"""One failure class per fault category, so that shrinking cannot slide from one to another.

Hypothesis tells bugs apart by exception type and the line that raised it: each class here is
raised from exactly one place (``machine.DifferentialMachine._check``), so a shrink that started
from a Replay stays a Replay.  The classes carry the divergence and the history that led to it.
"""

from __future__ import annotations

from refmodel import CATEGORIES, CATEGORY_INFO


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


def _make(category: str) -> type[Failure]:
    info = CATEGORY_INFO[category]
    doc = f"{category} ({info.paper_switch}, breaks {info.breaks}): {info.mutant}."
    return type(f"{category}Failure", (Failure,), {"category": category, "__doc__": doc,
                                                    "__module__": __name__})


FAILURES: dict[str, type[Failure]] = {c: _make(c) for c in CATEGORIES}
globals().update({cls.__name__: cls for cls in FAILURES.values()})

__all__ = ["FAILURES", "Failure", *(cls.__name__ for cls in FAILURES.values())]
