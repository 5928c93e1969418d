"""The resume plane's static part: a workflow, and the persisted state a caller can read.

docs/contract.md §1.  A ``Workflow(n, gates, values)`` runs tasks ``1..n`` in order; a gated
task pauses for a resume value drawn from ``values``.  A ``StateView`` is what ``query`` reports
about one thread's persisted state; every adapter must produce one from its framework's store
without running anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field

STATUSES = ("new", "interrupted", "incomplete", "completed")


class InvalidWorkflow(ValueError):
    """A workflow definition that the contract does not allow."""


@dataclass(frozen=True, slots=True)
class Workflow:
    """Tasks ``1..n`` in order; ``gates`` pause for one of ``values``."""

    n: int
    gates: frozenset[int] = field(default_factory=frozenset)
    values: tuple[str, ...] = ("a", "b")

    def __post_init__(self) -> None:
        # Coerce so that Workflow(3, {2}, ["a", "b"]) and a decoded JSON document hash alike.
        object.__setattr__(self, "gates", frozenset(self.gates))
        object.__setattr__(self, "values", tuple(self.values))
        if not isinstance(self.n, int) or isinstance(self.n, bool) or self.n < 1:
            raise InvalidWorkflow(f"Workflow.n must be an integer >= 1, got {self.n!r}")
        bad = sorted(g for g in self.gates if not isinstance(g, int) or not 1 <= g <= self.n)
        if bad:
            raise InvalidWorkflow(f"Workflow.gates must lie in 1..{self.n}, got {bad!r}")
        if not self.values or len(set(self.values)) != len(self.values):
            raise InvalidWorkflow(f"Workflow.values must be distinct and non-empty: {self.values!r}")
        if not all(isinstance(v, str) and v for v in self.values):
            raise InvalidWorkflow(f"Workflow.values must be non-empty strings: {self.values!r}")

    def to_json(self) -> dict:
        return {"n": self.n, "gates": sorted(self.gates), "values": list(self.values)}

    @classmethod
    def from_json(cls, doc: dict) -> Workflow:
        return cls(doc["n"], frozenset(doc["gates"]), tuple(doc["values"]))


def status_of(workflow: Workflow, done: tuple, pending: int | None) -> str:
    """Derive the status from the persisted content alone.

    A framework that stores its input before the first task runs and one that stores nothing
    until a task completes are indistinguishable by the contract, so an input-only checkpoint
    reads as ``new`` (docs/semantics.md, "status").
    """
    if pending is not None:
        return "interrupted"
    if len(done) >= workflow.n:
        return "completed"
    if not done:
        return "new"
    return "incomplete"


@dataclass(frozen=True, slots=True)
class StateView:
    """One thread's persisted state as ``query`` reports it.

    ``done`` and ``answers`` hold whatever the store holds, so an adapter can report content that
    breaks the schema (``is_valid`` says whether it does); ``answers`` is a sorted tuple of
    ``(task, value)`` pairs so that views hash and compare by value.
    """

    status: str
    done: tuple = ()
    answers: tuple = ()
    pending: int | None = None

    @classmethod
    def of(cls, workflow: Workflow, done, answers, pending) -> StateView:
        """Build a view from raw store content, deriving the status."""
        done = tuple(done)
        pairs = sorted_pairs(dict(answers).items())
        return cls(status_of(workflow, done, pending), done, pairs, pending)

    def answer(self, task: int):
        return dict(self.answers).get(task)

    def is_valid(self, workflow: Workflow) -> bool:
        """Does this content fit the workflow's state schema (docs/contract.md, CV)?"""
        if self.done != tuple(range(1, len(self.done) + 1)) or len(self.done) > workflow.n:
            return False
        answered = {t for t, _ in self.answers}
        if answered != {t for t in self.done if t in workflow.gates}:
            return False
        if any(v not in workflow.values for _, v in self.answers):
            return False
        if self.pending is not None and (
            self.pending not in workflow.gates or self.pending != len(self.done) + 1
        ):
            return False
        return self.status == status_of(workflow, self.done, self.pending)

    def to_json(self) -> dict:
        return {
            "status": self.status,
            "done": list(self.done),
            "answers": {str(t): v for t, v in self.answers},
            "pending": self.pending,
        }

    @classmethod
    def from_json(cls, doc: dict) -> StateView:
        answers = sorted_pairs((_task_key(t), v) for t, v in doc["answers"].items())
        return cls(doc["status"], tuple(doc["done"]), answers, doc["pending"])


def _task_key(key: str):
    # JSON object keys are strings; task numbers come back as ints, garbage stays as it was.
    return int(key) if key.lstrip("-").isdigit() else key


def sorted_pairs(pairs) -> tuple:
    """Pairs in a canonical order, tolerating keys of mixed types (stores can hold garbage)."""
    return tuple(sorted(pairs, key=lambda kv: (not isinstance(kv[0], int), repr(kv[0]) if not isinstance(kv[0], int) else kv[0])))
