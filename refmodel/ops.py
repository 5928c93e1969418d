"""Operations a caller can apply (docs/contract.md §2) and what is observed (section 3).

Every operation is a small frozen dataclass with a JSON form; the trace format stores these JSON
forms, and adapters receive the dataclasses.  Threads and branches are named by the harness
(``"t0"``, ``"f1"``): an adapter maps the names onto its framework's own ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PHASES = ("before_effect", "in_flight", "after_commit")
CRASH_KINDS = ("exception", "sigkill")
TAMPER_HOWS = ("corrupt", "invalid", "forged")
# The kinds of stored part a ``forged`` tamper may edit alone (``Tamper.part``; an ``answer``
# part names its gate, ``answer:<t>``).
FORGE_PART_KINDS = ("done", "answer", "pending")
# What a tamper reaches (docs/contract.md §3): the thread's latest checkpoint, the thread's whole
# history (every checkpoint of it, so every fork of it; no other branch), its lineage (one
# framework-level thread or file: a run and the forks taken from it), a lineage that only a
# *listing* of it can see (every checkpoint its own row: another branch meets the damaged row only
# where the framework or the adapter lists the framework-level thread, and that can only fail
# loudly), or the whole store.
TAMPER_SCOPES = ("thread", "history", "lineage", "listing", "store")
# The scopes that reach every branch of a framework-level thread (a tamper's reach), and those
# under which a checkpoint's bytes are its own row (a fork of an older checkpoint, and a branch
# merely reached, read intact data).
LINEAGE_SCOPES = ("lineage", "listing")
OWN_ROW_SCOPES = ("thread", "listing")
OUTCOMES = ("ok", "interrupted", "completed", "crashed", "rejected", "stuck")


class InvalidOperation(ValueError):
    """An operation that is malformed, or not applicable to the model's current world."""


@dataclass(frozen=True, slots=True)
class CrashAt:
    """Kill the run at ``task``/``phase``: an exception in the task, or SIGKILL at a barrier."""

    task: int
    phase: str
    kind: str = "exception"

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise InvalidOperation(f"CrashAt.phase must be one of {PHASES}, got {self.phase!r}")
        if self.kind not in CRASH_KINDS:
            raise InvalidOperation(f"CrashAt.kind must be one of {CRASH_KINDS}, got {self.kind!r}")

    def to_json(self) -> dict:
        return {"task": self.task, "phase": self.phase, "kind": self.kind}


@dataclass(frozen=True, slots=True)
class Op:
    """Base of all operations: ``thread`` is the thread the operation addresses."""

    thread: str

    name = "op"
    executes = False  # does it run tasks (and so accept a crash point and BadOutput)?
    # Does it make the framework run the thread (and write its checkpoints)?  Every executing op,
    # and a race's racers and a twin's recoveries, which carry no crash point of their own.
    runs = False

    def to_json(self) -> dict:
        doc = {"op": self.name, "thread": self.thread}
        for f in self.__dataclass_fields__:
            if f == "thread":
                continue
            value = getattr(self, f)
            if isinstance(value, CrashAt):
                value = value.to_json()
            elif isinstance(value, tuple):
                value = list(value)
            doc[f] = value
        return doc


@dataclass(frozen=True, slots=True)
class _Executing(Op):
    crash: CrashAt | None = None
    bad_output: int | None = None  # BadOutput(t): task t returns a value outside the schema

    executes = True
    runs = True


@dataclass(frozen=True, slots=True)
class Start(_Executing):
    """Begin a new run on a thread that does not exist yet."""

    name = "start"


@dataclass(frozen=True, slots=True)
class Resume(_Executing):
    """Answer the pending interrupt at the thread's head with ``value`` (RETRY intent).

    ``gate``, when set, names the interrupt the caller answers (racers know which one they were
    shown); a different pending gate, or none, is then nothing to do.  ``answers`` (a shaped
    workflow, docs/contract.md §7) maps pending question ids to values instead: each named
    question consumes its value, the rest stay pending.  Held as sorted pairs so that ops hash;
    a plain resume's JSON form has no such field.
    """

    value: str = ""
    gate: int | str | None = None
    answers: tuple = ()
    name = "resume"

    def __post_init__(self) -> None:
        _sort_answers(self)

    def to_json(self) -> dict:
        return _answers_json(self, Op.to_json(self))


def _sort_answers(op) -> None:
    """A map of answers (``Resume.answers``, ``Fork.answers``) as sorted pairs, so that ops
    compare and hash by value however the map was given."""
    object.__setattr__(op, "answers", tuple(sorted(dict(op.answers).items())))


def _answers_json(op, doc: dict) -> dict:
    """``doc`` with the map of answers as a JSON object, or without the field when the map is
    empty: the form of every resume and fork written before maps existed."""
    if op.answers:
        doc["answers"] = dict(op.answers)
    else:
        del doc["answers"]
    return doc


@dataclass(frozen=True, slots=True)
class Recover(_Executing):
    """Continue after a crash, from the durable frontier."""

    name = "recover"


@dataclass(frozen=True, slots=True)
class Fork(_Executing):
    """Resume the checkpoint at which ``gate`` was pending as branch ``new_thread`` (FORK intent).

    In a shaped workflow ``gate`` is a question id, the one the fork answers with ``value``, and
    ``answers`` may map other questions pending at that checkpoint to their values (a fork takes
    a map as a resume does, docs/contract.md §7); a fork without one has no such JSON field.
    """

    gate: int | str = 0
    value: str = ""
    new_thread: str = ""
    answers: tuple = ()
    name = "fork"

    def __post_init__(self) -> None:
        _sort_answers(self)

    def to_json(self) -> dict:
        return _answers_json(self, Op.to_json(self))


@dataclass(frozen=True, slots=True)
class Query(Op):
    """Read the persisted state; runs nothing."""

    name = "query"


@dataclass(frozen=True, slots=True)
class Tamper(Op):
    """Alter the thread's latest persisted checkpoint: ``corrupt``, ``invalid`` or ``forged``.

    ``part`` (``forged`` only) names the stored part the forgery edits on its own: ``"done"``
    (the log), ``"answer:<t>"`` (gate ``t``'s answer) or ``"pending"`` (the pending-gate record),
    as ``refmodel.forge`` does; ``None`` is ``forge``'s default edit (traces written before parts
    existed mean exactly that, and their JSON form stays without the field).
    """

    how: str = "corrupt"
    part: str | None = None
    name = "tamper"

    def __post_init__(self) -> None:
        if self.how not in TAMPER_HOWS:
            raise InvalidOperation(f"Tamper.how must be one of {TAMPER_HOWS}, got {self.how!r}")
        if self.part is not None and (self.how != "forged" or not _forge_part(self.part)):
            raise InvalidOperation(
                f"Tamper.part must be done, pending or answer:<task>, with how='forged'; "
                f"got part={self.part!r}, how={self.how!r}")

    def to_json(self) -> dict:
        doc = Op.to_json(self)
        if self.part is None:
            del doc["part"]  # the form of every tamper written before parts existed
        return doc


def part_kind(part: str) -> str:
    """``"answer:2"`` -> ``"answer"``; ``"done"`` and ``"pending"`` are their own kind."""
    return part.split(":", 1)[0]


def _forge_part(part) -> bool:
    if part in ("done", "pending"):
        return True
    kind, _, task = str(part).partition(":")
    return isinstance(part, str) and kind == "answer" and task.isdigit()


@dataclass(frozen=True, slots=True)
class Race(Op):
    """``len(values)`` processes resume the same pending interrupt at once from one store.

    ``gates`` (a shaped workflow, docs/contract.md §7), when set, names the question each racer
    answers, one per racer: racers may target different questions of one thread.  A race that
    names none has no such field in its JSON form.
    """

    values: tuple[str, ...] = ()
    forced: bool = False  # all racers read before any writes (where the adapter can hold writes)
    gates: tuple = ()
    name = "race"
    runs = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", tuple(self.values))
        object.__setattr__(self, "gates", tuple(self.gates))
        if len(self.values) < 2:
            raise InvalidOperation(f"Race.values needs at least two racers, got {self.values!r}")
        if self.gates and len(self.gates) != len(self.values):
            raise InvalidOperation(f"Race.gates names one question per racer: {self.gates!r}")

    def to_json(self) -> dict:
        doc = Op.to_json(self)
        if not self.gates:
            del doc["gates"]  # the form of every race written before shapes existed
        return doc


@dataclass(frozen=True, slots=True)
class TwinRecover(Op):
    """Recover twice, from two byte-identical copies of the durable store."""

    name = "twin_recover"
    runs = True


@dataclass(frozen=True, slots=True)
class StaleResume(Op):
    """Resume gate ``gate`` of the thread through a *stale handle* (docs/contract.md §2, added): one
    the caller obtained while ``gate`` was pending, before an earlier op consumed it (a checkpoint
    id, a saved state dict, a flow or context object it still holds), answering ``value``.

    The gate was consumed already, so nothing may run: the contract allows a loud refusal or a
    no-op, never a second consume.  It carries no crash point and no BadOutput (the reference
    runs no task), but it *executes* in the target: the adapter makes the framework call.
    """

    gate: int | str = 0  # a question id in a shaped workflow
    value: str = ""
    name = "stale_resume"
    executes = True
    runs = True


OP_TYPES: dict[str, type[Op]] = {
    cls.name: cls
    for cls in (Start, Resume, Recover, Fork, Query, Tamper, Race, TwinRecover, StaleResume)
}


def op_from_json(doc: dict) -> Op:
    """Decode one operation; raises ``InvalidOperation`` naming the first bad field."""
    kind = doc.get("op")
    cls = OP_TYPES.get(kind)
    if cls is None:
        raise InvalidOperation(f"op: unknown operation {kind!r}; expected one of {sorted(OP_TYPES)}")
    kwargs = {}
    for f in cls.__dataclass_fields__:
        if f in doc:
            kwargs[f] = doc[f]
    if kwargs.get("crash") is not None:
        crash = kwargs["crash"]
        kwargs["crash"] = CrashAt(crash["task"], crash["phase"], crash.get("kind", "exception"))
    try:
        return cls(**kwargs)
    except TypeError as exc:  # a missing or surplus field
        raise InvalidOperation(f"{kind}: {exc}") from None


@dataclass(frozen=True, slots=True)
class Observation:
    """What the harness records after one operation (docs/contract.md §3).

    ``effects`` is a sorted tuple of ``(branch, task, value)`` rows, one per firing.  ``state`` is
    the op's thread as ``query`` reports it; in an *expected* observation ``None`` means "not
    compared" (the thread's store was tampered with), in an *observed* one "could not be read".
    ``twin`` is the second copy's observation of a ``twin_recover``.  ``error`` is, for a
    ``rejected`` or ``crashed`` outcome, the framework's exception type and the first line of its
    message (``"ValueError: checkpoint does not decode"``): evidence for a reader, never compared.
    """

    outcome: str
    effects: tuple = ()
    state: object = None  # StateView | None
    twin: Observation | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "effects", sort_effects(self.effects))

    def same_as(self, observed: Observation) -> bool:
        """Does ``observed`` match this *expected* observation?"""
        if self.outcome != observed.outcome or self.effects != observed.effects:
            return False
        if self.state is not None and self.state != observed.state:
            return False
        if self.twin is None:
            return observed.twin is None
        return observed.twin is not None and self.twin.same_as(observed.twin)

    def to_json(self) -> dict:
        doc = {
            "outcome": self.outcome,
            "effects": [list(e) for e in self.effects],
            "state": None if self.state is None else self.state.to_json(),
        }
        if self.twin is not None:
            doc["twin"] = self.twin.to_json()
        if self.error is not None:
            doc["error"] = self.error
        return doc

    @classmethod
    def from_json(cls, doc: dict) -> Observation:
        from .workflow import StateView

        state = None if doc.get("state") is None else StateView.from_json(doc["state"])
        twin = None if doc.get("twin") is None else cls.from_json(doc["twin"])
        effects = tuple(tuple(e) for e in doc.get("effects", ()))
        return cls(doc["outcome"], effects, state, twin, doc.get("error"))


def sort_effects(effects) -> tuple:
    """Effects compare as a multiset: their order across racing processes is not defined."""
    rows = (tuple(e) for e in effects)
    return tuple(sorted(rows, key=lambda e: (str(e[0]), e[1], "" if e[2] is None else str(e[2]))))


@dataclass(frozen=True, slots=True)
class Step:
    """One recorded step of a history: the op, what was observed, and what the oracle allowed."""

    op: Op
    observed: Observation
    allowed: tuple = field(default=())  # tuple[Observation, ...]
