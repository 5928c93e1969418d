"""The resume plane's static part: a workflow, and the persisted state a caller can read.

docs/contract.md §1.  A ``Workflow(n, gates, values)`` runs tasks ``1..n`` in order; a gated
task pauses for a resume value drawn from ``values``.  A ``StateView`` is what ``query`` reports
about one thread's persisted state; every adapter must produce one from its framework's store
without running anything.

docs/contract.md §7.  A ``Shape`` generalises the chain: stages of parallel tasks, several
questions per task, a pre-effect, a looped stage.  ``Workflow.of(shape)`` builds the workflow
of a shape; a linear shape (one task per stage, at most one question, no pre-effect, no loop) is
normalised away, so it is the very ``Workflow(n, gates, values)`` it describes.

Labels of a shaped workflow are strings, so they survive JSON as they are: a task instance is
``"<task>"`` on its stage's first visit and ``"<task>#<visit>"`` on a later one, its questions
``"<instance>.q<k>"`` (the interrupt ids), its pre-effect ``"<instance>.pre"``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

STATUSES = ("new", "interrupted", "incomplete", "completed")
# The version of a shape's JSON form (the ``"shape"`` key of a non-linear workflow).
SHAPE_VERSION = 1


class InvalidWorkflow(ValueError):
    """A workflow definition that the contract does not allow."""


@dataclass(frozen=True, slots=True)
class Task:
    """One task of a stage: it asks ``questions`` in order (q >= 0), firing its ``pre_effect``
    first when it has one, and fires its own effect once, after the last answer."""

    questions: int = 0
    pre_effect: bool = False

    def to_json(self) -> dict:
        return {"questions": self.questions, "pre_effect": self.pre_effect}


@dataclass(frozen=True, slots=True)
class Loop:
    """Stage ``stage`` (1-based) is visited up to ``visits`` times: again after a visit whose
    first question was answered ``again`` (a deterministic condition over the answers so far)."""

    stage: int
    visits: int
    again: str

    def to_json(self) -> dict:
        return {"stage": self.stage, "visits": self.visits, "again": self.again}


def instance(task: int, visit: int = 1) -> str:
    return str(task) if visit == 1 else f"{task}#{visit}"


def question(label: str, k: int) -> str:
    return f"{label}.q{k}"


def pre(label: str) -> str:
    return f"{label}.pre"


def parse(label: str) -> tuple[int, int]:
    """``"3#2"`` -> ``(3, 2)``; a question or pre-effect label names its instance's pair."""
    task, _, visit = str(label).split(".")[0].partition("#")
    return int(task), int(visit or 1)


# What a shape may use (``Shape.features``): a target declares the ones it can express, and is
# given shapes of those only.
SHAPE_FEATURES = ("parallel", "questions", "pre_effect", "loop")


@dataclass(frozen=True, slots=True)
class Shape:
    """Stages of parallel tasks, numbered ``1..n`` across the stages in order, and at most one
    looped stage."""

    stages: tuple  # tuple[tuple[Task, ...], ...]
    loop: Loop | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "stages", tuple(tuple(stage) for stage in self.stages))
        if not self.stages or not all(self.stages):
            raise InvalidWorkflow("a shape needs at least one stage, each with a task")
        for task in (t for stage in self.stages for t in stage):
            if not isinstance(task, Task) or task.questions < 0:
                raise InvalidWorkflow(f"a stage holds Task(questions >= 0, ...), got {task!r}")
            if task.pre_effect and not task.questions:
                # The pre-effect is work before a question: without one it is the effect's.
                raise InvalidWorkflow(f"a pre-effect needs a question to come before: {task!r}")
        loop = self.loop
        if loop is not None:
            if not 1 <= loop.stage <= len(self.stages) or loop.visits < 2:
                raise InvalidWorkflow(f"a loop names a stage and at least two visits: {loop!r}")
            if not any(t.questions for t in self.stages[loop.stage - 1]):
                # The condition reads the visit's own answer: without one it could never change.
                raise InvalidWorkflow(f"the looped stage {loop.stage} asks no question")

    def features(self) -> frozenset:
        """What of §7 this shape uses, of ``SHAPE_FEATURES``: ``parallel`` (a stage of several
        tasks), ``questions`` (a task asking several), ``pre_effect``, ``loop``."""
        tasks = [t for stage in self.stages for t in stage]
        used = {"parallel": any(len(stage) > 1 for stage in self.stages),
                "questions": any(t.questions > 1 for t in tasks),
                "pre_effect": any(t.pre_effect for t in tasks),
                "loop": self.loop is not None}
        return frozenset(f for f, on in used.items() if on)

    @property
    def linear(self) -> bool:
        return self.loop is None and all(
            len(stage) == 1 and stage[0].questions <= 1 and not stage[0].pre_effect
            for stage in self.stages)

    def tasks(self, stage: int) -> range:
        """The task numbers of stage ``stage`` (1-based)."""
        first = 1 + sum(len(s) for s in self.stages[: stage - 1])
        return range(first, first + len(self.stages[stage - 1]))

    def spec(self, task: int) -> Task:
        return [t for stage in self.stages for t in stage][task - 1]

    def stage_of(self, task: int) -> int:
        return next(s for s in range(1, len(self.stages) + 1) if task in self.tasks(s))

    def visits(self, stage: int) -> int:
        return self.loop.visits if self.loop is not None and self.loop.stage == stage else 1

    def instances(self) -> tuple[str, ...]:
        """Every task instance a run can reach, in the canonical order (``order``)."""
        return tuple(instance(t, v) for s in range(1, len(self.stages) + 1)
                     for v in range(1, self.visits(s) + 1) for t in self.tasks(s))

    def knows(self, label) -> bool:
        """Is ``label`` a task instance, question or pre-effect of this shape?  Labels come from
        adapters too, so a stranger must be told apart, never crash a reader."""
        if not isinstance(label, str):
            return False
        base, _, rest = label.partition(".")
        if base not in self.instances():
            return False
        return (not rest or label in self.questions(base)
                or (rest == "pre" and self.spec(parse(base)[0]).pre_effect))

    def questions(self, label: str) -> tuple[str, ...]:
        return tuple(question(label, k) for k in range(1, self.spec(parse(label)[0]).questions + 1))

    def order(self, label: str) -> tuple:
        """The canonical order of labels: stage, visit, task, then a question's number (a
        store's order of parallel branches is not observable, so views list them in this one)."""
        task, visit = parse(label)
        rest = str(label).partition(".")[2]
        return (self.stage_of(task), visit, task, rest)

    def position(self, done, answers) -> tuple[int, int] | None:
        """The (stage, visit) a run is at, given what is done and answered; ``None`` when the
        run is finished."""
        done, answers = set(done), dict(answers)
        position = (1, 1)
        while position is not None:
            stage, visit = position
            if any(instance(t, visit) not in done for t in self.tasks(stage)):
                return position
            position = self.after(stage, visit, answers)
        return None

    def after(self, stage: int, visit: int, answers) -> tuple[int, int] | None:
        """The (stage, visit) that follows a finished visit: the same stage again while the
        loop condition holds, else the next stage; ``None`` past the last one."""
        if visit < self.visits(stage):
            first = next(t for t in self.tasks(stage) if self.spec(t).questions)
            if dict(answers).get(question(instance(first, visit), 1)) == self.loop.again:
                return stage, visit + 1
        return (stage + 1, 1) if stage < len(self.stages) else None

    def to_json(self) -> dict:
        doc = {"version": SHAPE_VERSION,
               "stages": [[t.to_json() for t in stage] for stage in self.stages]}
        if self.loop is not None:
            doc["loop"] = self.loop.to_json()
        return doc

    @classmethod
    def from_json(cls, doc: dict) -> Shape:
        if doc.get("version") != SHAPE_VERSION:
            raise InvalidWorkflow(f"shape version {doc.get('version')!r}: this oracle reads "
                                  f"version {SHAPE_VERSION}")
        loop = doc.get("loop")
        return cls(tuple(tuple(Task(t["questions"], t.get("pre_effect", False)) for t in stage)
                         for stage in doc["stages"]),
                   None if loop is None else Loop(loop["stage"], loop["visits"], loop["again"]))


@dataclass(frozen=True, slots=True)
class Workflow:
    """Tasks ``1..n`` in order; ``gates`` pause for one of ``values``."""

    n: int
    gates: frozenset[int] = field(default_factory=frozenset)
    values: tuple[str, ...] = ("a", "b")
    shape: Shape | None = None  # docs/contract.md §7; None: the linear chain of §1

    def __post_init__(self) -> None:
        # Coerce so that Workflow(3, {2}, ["a", "b"]) and a decoded JSON document hash alike.
        object.__setattr__(self, "gates", frozenset(self.gates))
        object.__setattr__(self, "values", tuple(self.values))
        if self.shape is not None:
            shape = self.shape
            n = sum(len(stage) for stage in shape.stages)
            gates = frozenset(t for t in range(1, n + 1) if shape.spec(t).questions)
            if (self.n, self.gates) != (n, gates):
                raise InvalidWorkflow(f"Workflow(n, gates) must be the shape's ({n}, "
                                      f"{sorted(gates)}), got ({self.n!r}, {sorted(self.gates)})")
            if shape.loop is not None and shape.loop.again not in self.values:
                raise InvalidWorkflow(f"the loop's answer {shape.loop.again!r} is not a value")
            if shape.linear:  # the chain it describes: one workflow, one JSON form, one hash
                object.__setattr__(self, "shape", None)
        if not isinstance(self.n, int) or isinstance(self.n, bool) or self.n < 1:
            raise InvalidWorkflow(f"Workflow.n must be an integer >= 1, got {self.n!r}")
        bad = sorted(g for g in self.gates if not isinstance(g, int) or not 1 <= g <= self.n)
        if bad:
            raise InvalidWorkflow(f"Workflow.gates must lie in 1..{self.n}, got {bad!r}")
        if not self.values or len(set(self.values)) != len(self.values):
            raise InvalidWorkflow(f"Workflow.values must be distinct and non-empty: {self.values!r}")
        if not all(isinstance(v, str) and v for v in self.values):
            raise InvalidWorkflow(f"Workflow.values must be non-empty strings: {self.values!r}")

    @classmethod
    def of(cls, shape: Shape, values=("a", "b")) -> Workflow:
        """The workflow of ``shape``: ``n`` and ``gates`` follow from it."""
        n = sum(len(stage) for stage in shape.stages)
        return cls(n, frozenset(t for t in range(1, n + 1) if shape.spec(t).questions),
                   values, shape)

    def gated(self, label) -> bool:
        """Is ``label`` (a task, or a task instance of a shape) a task that asks?"""
        if self.shape is None:
            return label in self.gates
        return self.shape.knows(label) and "." not in label and parse(label)[0] in self.gates

    def to_json(self) -> dict:
        doc = {"n": self.n, "gates": sorted(self.gates), "values": list(self.values)}
        if self.shape is not None:  # a linear workflow keeps the form every trace was written in
            doc["shape"] = self.shape.to_json()
        return doc

    @classmethod
    def from_json(cls, doc: dict) -> Workflow:
        shape = None if doc.get("shape") is None else Shape.from_json(doc["shape"])
        return cls(doc["n"], frozenset(doc["gates"]), tuple(doc["values"]), shape)


def status_of(workflow: Workflow, done: tuple, pending, answers=()) -> str:
    """Derive the status from the persisted content alone.

    A framework that stores its input before the first task runs and one that stores nothing
    until a task completes are indistinguishable by the contract, so an input-only checkpoint
    reads as ``new`` (docs/semantics.md, "status").  A shape's run is complete when its loop
    condition, read over ``answers``, leads past the last stage.
    """
    if pending is not None:
        return "interrupted"
    if workflow.shape is not None:
        try:
            finished = workflow.shape.position(done, answers) is None
        except (ValueError, TypeError):  # garbage labels: a store can hold anything
            finished = False
        if finished:
            return "completed"
    elif len(done) >= workflow.n:
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
        if workflow.shape is not None:
            # Parallel branches finish in no defined order: the canonical one (Shape.order).
            done, pairs = _canonical(workflow, done), _canonical(workflow, pairs)
            pending = (_canonical(workflow, pending) or None) if pending is not None else None
        return cls(status_of(workflow, done, pending, pairs), done, pairs, pending)

    def answer(self, task: int):
        return dict(self.answers).get(task)

    def is_valid(self, workflow: Workflow) -> bool:
        """Does this content fit the workflow's state schema (docs/contract.md, CV)?"""
        if workflow.shape is not None:
            return _shape_valid(workflow, self)
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
            "pending": list(self.pending) if isinstance(self.pending, tuple) else self.pending,
        }

    @classmethod
    def from_json(cls, doc: dict, workflow: Workflow | None = None) -> StateView:
        """Decode a view; given a shaped ``workflow``, its labels in the canonical order that
        ``of`` gives them (JSON keeps an object's keys in no order a shape defines)."""
        answers = sorted_pairs((_task_key(t), v) for t, v in doc["answers"].items())
        pending = doc["pending"]
        view = cls(doc["status"], tuple(doc["done"]), answers,
                   tuple(pending) if isinstance(pending, list) else pending)
        if workflow is None or workflow.shape is None:
            return view
        pending = view.pending
        if isinstance(pending, tuple):
            pending = _canonical(workflow, pending)
        return cls(view.status, _canonical(workflow, view.done),
                   _canonical(workflow, view.answers), pending)


def _canonical(workflow: Workflow, items) -> tuple:
    """Labels (or ``(label, value)`` pairs) of a shape in its canonical order; garbage last."""
    def key(item):
        label = item[0] if isinstance(item, tuple) else item
        try:
            return (0, workflow.shape.order(label), "")
        except (ValueError, TypeError, StopIteration, IndexError):
            return (1, (), repr(item))
    return tuple(sorted(items, key=key))


def _shape_valid(workflow: Workflow, view: StateView) -> bool:
    """A shaped state's schema: known labels, no label twice, answers drawn from ``values``,
    the status its content implies.  Which labels go together (a sibling lost, a question
    asked again) is prefix consistency's matter, not the schema's (docs/semantics.md §7)."""
    try:
        return _shape_fits(workflow, view)
    except TypeError:  # unhashable garbage: a store can hold anything
        return False


def _shape_fits(workflow: Workflow, view: StateView) -> bool:
    shape = workflow.shape
    instances = set(shape.instances())
    asks = {q for label in instances for q in shape.questions(label)}
    pending = view.pending if view.pending is not None else ()
    if not isinstance(pending, tuple) or not pending and view.pending is not None:
        return False
    if not set(view.done) <= instances or len(set(view.done)) != len(view.done):
        return False
    if not {q for q, _ in view.answers} <= asks or not set(pending) <= asks:
        return False
    if any(v not in workflow.values for _, v in view.answers):
        return False
    return view.status == status_of(workflow, view.done, view.pending, view.answers)


def _task_key(key: str):
    # JSON object keys are strings; task numbers come back as ints, garbage stays as it was.
    return int(key) if key.lstrip("-").isdigit() else key


def sorted_pairs(pairs) -> tuple:
    """Pairs in a canonical order, tolerating keys of mixed types (stores can hold garbage)."""
    return tuple(sorted(pairs, key=lambda kv: (not isinstance(kv[0], int), repr(kv[0]) if not isinstance(kv[0], int) else kv[0])))
