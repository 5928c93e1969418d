"""Fault categories (docs/contract.md §5) and the mutant switches that plant each one.

A mutant is the reference model with exactly one switch on.  The fuzzer's self-tests run it as a
target that is known to be wrong in one way, and must find that way and name it.
"""

from __future__ import annotations

from dataclasses import dataclass

# Section 5's order is the classifier's order: the first category that explains a divergence wins.
CATEGORIES = (
    "Replay",
    "ForkIgnore",
    "InvalidPersist",
    "NondetRecovery",
    "DoubleConsume",
    "PrefixReplay",
    "LostUpdate",
    "Stuck",
    "StateMismatch",
    "Unclassified",
)


@dataclass(frozen=True, slots=True)
class CategoryInfo:
    name: str
    paper_switch: str  # the switch in the TLA+ model in Resume Means Resume
    breaks: str  # the property it breaks
    mutant: str  # what the mutant of this name does


CATEGORY_INFO = {
    info.name: info
    for info in (
        CategoryInfo("Replay", "R1", "EO", "recover restarts at the last completed task, not after it"),
        CategoryInfo("ForkIgnore", "R2", "FD", "a fork of an answered gate keeps the source's answer"),
        CategoryInfo(
            "InvalidPersist",
            "R3",
            "CV",
            "persists a task's out-of-schema output, and uses tampered state silently",
        ),
        CategoryInfo(
            "NondetRecovery", "R4", "RD", "the second copy of a twin recovery re-runs the last task"
        ),
        CategoryInfo(
            "DoubleConsume", "R5", "CO", "a resume with nothing pending re-consumes the last gate, "
            "and a stale handle's checkpoint is resumed again"
        ),
        CategoryInfo("PrefixReplay", "R9", "EO", "a resume re-runs every completed task first"),
        CategoryInfo("LostUpdate", "R11", "CO", "every racer consumes the pending interrupt"),
        CategoryInfo("Stuck", "R6", "LV", "recovery after a SIGKILL inside a task is refused"),
        CategoryInfo("StateMismatch", "-", "PC", "a resume persists the next value in line as the gate's answer"),
        CategoryInfo("Unclassified", "-", "-", "(no mutant: a gap in the model or the adapter)"),
    )
}

MUTANTS = tuple(c for c in CATEGORIES if c != "Unclassified")

# Narrower switches than a category's own mutant, each planting a fault of an existing category
# that only some operations can expose (name -> (category, what it does)).  Not in ``MUTANTS``,
# whose names are the categories: they exist to show that the generator reaches that operation.
SWITCHES = {
    "UncheckedPending": ("InvalidPersist",
                         "the integrity check skips the pending-gate record: a forgery of that "
                         "record alone (tamper forged, part pending) is used silently"),
}

# Switches that only a shaped workflow can expose (docs/contract.md §7), one per way to break its
# clauses, each in the category the contract gives that way.  Kept apart from ``SWITCHES``: only
# a shaped workflow exposes them, so only a campaign that draws shapes can find them.
SHAPE_SWITCHES = {
    "SiblingReplay": ("Replay",
                      "recovery after a crash in one branch runs the stage's finished sibling "
                      "branches again"),
    "LostSiblingWrite": ("StateMismatch",
                         "the join keeps only the branches that finished in the op that "
                         "completed the stage: an earlier sibling's write is lost"),
    "CrossedAnswer": ("DoubleConsume",
                      "an answer to one question of a task also answers its next questions"),
    "LoopCarry": ("DoubleConsume",
                  "a loop visit's questions take the previous visit's answers"),
    "AskedAgain": ("DoubleConsume",
                   "a task re-run on resume asks the question it just took an answer for again"),
    "PlainResumePicks": ("DoubleConsume",
                         "a plain resume with several questions pending silently answers the "
                         "first of them"),
    "PreEffectAgain": ("PrefixReplay",
                       "a task re-run on resume fires its pre-effect again, undocumented"),
}


def mutant_category(name: str) -> str:
    """The category a mutant (a ``MUTANTS``, ``SWITCHES`` or ``SHAPE_SWITCHES`` name) plants."""
    for switches in (SWITCHES, SHAPE_SWITCHES):
        if name in switches:
            return switches[name][0]
    return name


def check_mutant(name: str | None) -> str | None:
    """Validate a mutant name; ``None`` is the reference itself."""
    known = MUTANTS + tuple(SWITCHES) + tuple(SHAPE_SWITCHES)
    if name is not None and name not in known:
        raise ValueError(f"unknown mutant {name!r}; expected one of {', '.join(known)}")
    return name
