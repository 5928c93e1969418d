"""resumefuzz's reference semantics of the resume contract (``docs/contract.md``).

Standard library only, deterministic, and small enough to explore exhaustively.  The public names:

- ``Workflow``, ``StateView``: the workflow and what ``query`` reports; ``Shape``, ``Task``,
  ``Loop``: a workflow beyond a linear chain (``Workflow.of(shape)``);
- the operations ``Start``, ``Resume``, ``Recover``, ``Fork``, ``Query``, ``Tamper``, ``Race``,
  ``TwinRecover``, ``StaleResume`` (a resume through a stale handle), with ``CrashAt`` crash points, and the ``Observation`` of each;
- ``Model(workflow, mutant=None)``: the oracle, and ``World``: its state;
- ``classify``: divergence -> fault category; ``properties``: one predicate per property;
- ``MUTANTS`` / ``CATEGORIES``: the fault categories, in the classifier's order; ``SWITCHES``:
  narrower mutants of a category (``mutant_category`` names it); ``SHAPE_SWITCHES``: those only
  a shaped workflow exposes;
- ``explore_reference``, ``shortest_exposure``: breadth-first exploration.
"""

from . import properties
from .classify import RULES, Divergence, Rule, classify
from .explore import Exposure, candidate_ops, explore_reference, shortest_exposure
from .model import Model, ThreadModel, World, forge, forge_parts
from .mutants import CATEGORIES, CATEGORY_INFO, MUTANTS, SHAPE_SWITCHES, SWITCHES, mutant_category
from .ops import (
    CRASH_KINDS,
    FORGE_PART_KINDS,
    OUTCOMES,
    PHASES,
    TAMPER_HOWS,
    TAMPER_SCOPES,
    CrashAt,
    Fork,
    InvalidOperation,
    Observation,
    Op,
    Query,
    Race,
    Recover,
    Resume,
    StaleResume,
    Start,
    Step,
    Tamper,
    TwinRecover,
    op_from_json,
    part_kind,
)
from .run import Durable
from .workflow import (
    SHAPE_FEATURES,
    InvalidWorkflow,
    Loop,
    Shape,
    StateView,
    Task,
    Workflow,
    status_of,
)

__all__ = [name for name in dir() if not name.startswith("_")]
