"""A CrewAI Flows finding as a standalone script: the flow, the calls the case made, the check.

``reproduction(variant, workflow, evidence)`` composes ``adapters.reproduction.script.Script``
from three parts:

- the flow: ``workflow.flow_source``, the text the case imports as its module, pasted after the
  script's imports (CrewAI's, and the runtime's ``crash_point`` and ``effect``, which the flow's
  ``task_body`` calls);
- the readers the calls name, real functions below pasted with ``inspect.getsource``:
  ``checkpointing`` (the variant's ``CheckpointConfig``), ``checkpoints`` (the backend's
  listing, oldest first, as ``crewai checkpoint resume <location>`` orders it),
  ``latest_checkpoint``, ``checkpoint_at_gate`` (the checkpoint a run paused at, found by what
  it records), ``read_state`` (the backend's: tasks done, answers, pending gate) and
  ``outcome``;
- the calls ``case.py`` recorded while the engine replayed the trace
  (``WorkflowFlow.from_pending(ID['run-1'], persistence).resume('a')``), one ``Step`` per
  operation.  A flow id is a fresh uuid on every run, so the script keeps it in ``ID`` by run
  name, and the checkpoint a run paused at in ``AT_GATE`` (``_kept``: those a later line reads).

Where the steps run: CrewAI's event bus runs threads that a fork does not copy, so where one
step must run in a child process (a race, a SIGKILL) every step does, and ``ID`` and
``AT_GATE`` are kept in files (``Kept``).  Otherwise, where flows checkpoint, each step runs in a
fresh ``contextvars`` context, as the case runs each operation: ``Flow.from_checkpoint`` and
``Flow.fork`` attach their runtime state to the caller's context, and later flows in it would
join that state.  A ``@persist`` flow records none: its steps run one after the other.

Written for every operation but tampering (for that the report gives the replay line).  A twin
recovery is written as the recovery of the original store; where only the copy's recovery
differs, the script copies the store first as the engine does (``COPY``) and checks the copy's
recovery against the original's (``_with_twin``).  A forced race holds its racers at a
``multiprocessing.Barrier`` between ``from_pending`` (the read) and ``resume`` (the write), as
the case's ``race_ready`` does.  A custom store (``--store``) is built by its factory's
``ScriptStore`` (``custom_store``) and registered with ``set_flow_persistence_factory`` for the
class's ``@persist()``, as the case registers it; none where a step runs in a child process or
for a differing twin recovery.
"""

from __future__ import annotations

import glob
import inspect
import json
import os
import pathlib
import re
from dataclasses import dataclass, replace

from crewai.flow.async_feedback import HumanFeedbackPending
from crewai.state.checkpoint_config import CheckpointConfig

from adapters.reproduction.runtime import WORKDIR
from adapters.reproduction.script import (
    OUTCOME_WORDS,
    Check,
    Script,
    check_for,
    effect_rows,
    header,
    pins,
    ran,
    source_as,
    step_of,
    store_class,
    store_parts,
    without_docstring,
)

from . import sandbox
from .workflow import IMPORTS, flow_source

PINNED = ("crewai",)
# The switches of ``sandbox.SWITCHES`` a script sets: telemetry (``OTEL_SDK_DISABLED``: CrewAI's
# one reader of the three telemetry switches, and the OpenTelemetry SDK), the PyPI version check
# (``CI``), the first-run trace prompt, trace auto-collection and ``./.crewai``
# (``CREWAI_TESTING``).  Tracing stays off without them: the script's fresh HOME holds no trace
# consent (``should_enable_tracing``); the others are redundant with these, or concern what a
# flow without Memory never builds (chromadb) or a Redis lock nobody configured.
SCRIPT_SWITCHES = ("OTEL_SDK_DISABLED", "CI", "CREWAI_TESTING")
SUPPORTED_OPS = {"start", "resume", "recover", "twin_recover", "fork", "query", "race", "stale_resume"}
PROVIDER, SQLITE, persistence, checkpoints = None, None, None, None  # the script defines these


# -- what the script contains --------------------------------------------------------------------


def checkpointing(location, restore_from=None):
    """Checkpoint into ``location`` whenever a method finishes or the flow pauses."""
    return CheckpointConfig(location=location, provider=PROVIDER(), restore_from=restore_from,
                            on_events=["method_execution_finished", "method_execution_paused"])


def checkpoints_json(location):
    """Every checkpoint file under ``location``, oldest first (by modification time)."""
    files = glob.glob(os.path.join(location, "**", "*.json"), recursive=True)
    return sorted(files, key=lambda path: (os.stat(path).st_mtime_ns, path))


def checkpoints_sqlite(location):
    """Every checkpoint row in the file ``location``, oldest first (by rowid), as
    ``file.db#id``, the form ``restore_from`` takes."""
    if not os.path.exists(location):
        return []
    rows = SQLITE.connect(location).execute("SELECT id FROM checkpoints ORDER BY rowid")
    return [f"{location}#{row[0]}" for row in rows]


def latest_checkpoint(location):
    return checkpoints(location)[-1]


def checkpoint_at_gate(location, gate):
    """The newest checkpoint written when the flow paused at ``gate_<gate>``."""
    for loc in reversed(checkpoints(location)):
        doc = json.loads(PROVIDER().from_checkpoint(loc))  # as its provider reads it
        paused = [n["event"]["method_name"] for n in doc["event_record"]["nodes"].values()
                  if n["event"]["type"] == "method_execution_paused"]  # in the order they came
        if doc["trigger"] == "method_execution_paused" and paused[-1:] == [f"gate_{gate}"]:
            return loc


def read_state_persist(flow_id):
    """Tasks done, answers and the pending gate, as stored: the flow's latest saved state and
    its pending feedback."""
    state = persistence.load_state(flow_id) or {"done": [], "answers": {}}
    pending = persistence.load_pending_feedback(flow_id)
    return {"done": state["done"], "answers": {str(t): v for t, v in state["answers"].items()},
            "pending": int(pending[1].method_name.split("_")[1]) if pending else None}


def read_state_checkpoint(flow_id, location):
    """``read_state_persist``, the state read from the flow's latest checkpoint."""
    found = checkpoints(location)
    entities = json.loads(PROVIDER().from_checkpoint(found[-1]))["entities"] if found else []
    state = next((e["checkpoint_state"] for e in entities if e["entity_type"] == "flow"), None)
    state = state or {"done": [], "answers": {}}
    pending = persistence.load_pending_feedback(flow_id)
    return {"done": state["done"], "answers": {str(t): v for t, v in state["answers"].items()},
            "pending": int(pending[1].method_name.split("_")[1]) if pending else None}


class Kept:
    """Strings kept in files, one a key: what one child process keeps, the processes after it read."""

    def __getitem__(self, key):
        return pathlib.Path(WORKDIR, repr(key)).read_text()

    def __setitem__(self, key, value):
        pathlib.Path(WORKDIR, repr(key)).write_text(value)


def outcome(result):
    return "interrupted" if isinstance(result, HumanFeedbackPending) else "completed"


# The copy a restored backup or a second host has of the store: the bytes, in directory order,
# with fresh file times (``clone_store``, ``adapters.files.copy_files``), the SQLite journal as it is.
COPY = ('shutil.copytree("ck", "copy/ck", copy_function=shutil.copyfile)  # bytes, fresh mtimes',
        'for name in glob.glob("flows.db*"):  # flows.db, its -wal and -shm as they are',
        '    shutil.copyfile(name, f"copy/{name}")')

# The check's words (adapters.reproduction.script), as a CrewAI user says them.
WORDS = (
    (r"stops at an interrupt", "pauses for feedback (returns HumanFeedbackPending)"),
    (r"runs to the end", "completes"),
    (r"task (\d+) ran with ", r"task_\1 ran with feedback "),
    (r"task (\d+) (ran|answered)", r"task_\1 \2"),
    (r"the interrupt of task (\d+) pending", r"gate_\1 waiting for feedback"),
    (r"nothing pending", "no feedback pending"),
    (r"tasks done: ", "state.done: "),
)


# -- composing it ----------------------------------------------------------------------------------


def reproduction(variant, workflow, evidence) -> str | None:
    """The script of ``evidence``'s finding on ``variant``; None where none can be written."""
    ops = evidence.ops[: evidence.step + 1]
    if evidence.step >= len(evidence.observed) or any(op.name not in SUPPORTED_OPS for op in ops):
        return None
    check, twin = _check(evidence, ops)
    if check is None:
        return None
    backend = variant.options["backend"]
    isolated = any(op.name == "race" or (getattr(op, "crash", None) is not None
                                         and op.crash.kind == "sigkill") for op in ops)
    fresh = not isolated and backend not in ("persist", "custom") and sum(
        op.name != "query" for op in ops) > 1
    store = None
    if backend == "custom":
        # Not where a step runs in a child: @persist() holds the parent's store object, whose
        # connection the children would share; nor for a twin recovery, whose copy the factory
        # makes (StoreHandle.clone), not a file copy.
        store = None if isolated or twin else custom_store(variant.options)
        if store is None:
            return None
    steps, check = _steps(evidence, ops, check)
    if steps is None:
        return None
    definitions = _definitions(variant, workflow, steps, check, store, isolated)
    stdlib = [m for m in ("glob", "json", "multiprocessing", "pathlib", "shutil", "uuid")
              if f"{m}." in definitions or any(f"{m}." in c for c in _all_calls(steps)) or (
                  twin and m in ("glob", "shutil"))]
    script = Script(
        header=header("CrewAI Flows", _description(variant, store), evidence, pins(
            evidence, PINNED + (("pysqlite3",) if backend == "sqlite" else ())
            + (tuple(store.recipe.distributions) if store else ()))),
        imports=(),  # after the environment is set: in the definitions
        workflow_src=definitions,
        steps=tuple(steps),
        check=check,
        stdlib=("os", "tempfile", *(store.stdlib if store else ()), *stdlib),
        fresh_context=fresh,
        isolated=isolated,
    ).source()
    return _with_twin(script, evidence, isolated) if twin else script


def _check(evidence, ops) -> tuple:
    """The check of the diverging step, in CrewAI's words, and whether it is a twin recovery
    that only the copy tells apart (its check is written by ``_with_twin``)."""
    check = check_for(evidence, state_readable=True, outcome_readable=ops[-1].name != "race")
    if check is not None and check.aspect == "outcome" and evidence.observed[evidence.step].outcome == "crashed":
        # The crash point is ours; that it was reached at all says which task ran again: say
        # that (the effects) when it tells the observation apart too.
        check = check_for(evidence, state_readable=True, outcome_readable=False) or check
    twin = check is None and _twin_differs(evidence)
    if twin:
        check = Check(aspect="outcome", allowed=(), expected="", observed="")
    if check is None:
        return None, False
    return in_crewai_terms(check, _step_calls(evidence, evidence.step)), twin


def _step_calls(evidence, i: int) -> list:
    """The framework calls operation ``i`` made, as the case recorded them."""
    return [src for kind, src in (evidence.calls[i] if i < len(evidence.calls) else ()) if kind == "call"]


def _steps(evidence, ops, check) -> tuple:
    """One ``Step`` per operation, and the check with the state read it evaluates; (None,
    check) where an operation made no framework call to repeat."""
    recorded = [evidence.calls[i] if i < len(evidence.calls) else () for i in range(len(ops))]
    kept = _kept(recorded, check.reads_state)
    steps = []
    for i, op in enumerate(ops):
        calls = [src for kind, src in recorded[i] if kind == "call" or (kind, src) in kept[i]]
        racers = ()
        if op.name == "race":
            calls = _step_calls(evidence, i)
            if len(calls) != len(op.values):
                return None, check  # a racer that made no call, or more than one
            racers, calls = tuple(_held(c) if op.forced else (c,) for c in calls), []
        elif op.name != "query" and not calls:
            return None, check  # the adapter failed before any framework call: nothing to repeat
        steps.append(step_of(evidence, i, calls if op.name != "query" else (), racers=racers))
        if i == evidence.step and check.aspect == "state":
            reads = [src for kind, src in recorded[i] if kind == "read"]
            if not reads:
                return None, check
            check = replace(check, state_src=reads[-1])
    return steps, check


def _kept(calls: list, reads_state: bool) -> list:
    """Per operation, the ``ID[...] = ...`` and ``AT_GATE[...] = ...`` lines (kinds "id" and
    "gate": a flow id, the checkpoint a run paused at) that a later line reads."""
    # A state check reads the last operation's thread: its read keeps that run's id.
    last = calls[-1] if calls and reads_state else ()
    kept, later = [], " ".join(src for kind, src in last if kind == "read")
    for entries in reversed(calls):
        mine = set()
        for kind, src in reversed(entries):
            name, _, value = src.partition(" = ")
            if kind in ("id", "gate") and name in later:
                mine.add((kind, src))
                later = later.replace(name, "") + " " + value  # earlier lines see an older value
            elif kind == "call":
                later += " " + src
        kept.append(mine)
    return kept[::-1]


def _held(call: str) -> tuple:
    """A forced racer's ``X.resume(v)`` as ``flow = X``, the barrier, ``flow.resume(v)``: every
    racer reads the pending feedback before any resumes."""
    read, _, value = call.rpartition(".resume(")
    return (f"flow = {read}", "BARRIER.wait()", f"flow.resume({value}")


def _all_calls(steps) -> list:
    return [c for s in steps for c in (*s.calls, *(r for rs in s.racers for r in rs))]


def _definitions(variant, workflow, steps, check, store, isolated: bool) -> str:
    """Everything before the steps: the environment, the imports, the store, the flow, the
    readers the calls name, and the names the calls keep."""
    backend = variant.options["backend"]
    text = " ".join([*_all_calls(steps), check.state_src])
    persist = "" if store else 'SQLiteFlowPersistence("flows.db")' if backend == "persist" else None
    kept = "Kept()" if isolated else "{}"
    where = ", in files: each step runs in a child process" if isolated else ""
    racers = max(len(s.racers) for s in steps)
    return "\n\n\n".join(part.strip("\n") for part in filter(None, [
        "\n".join([*_environment(), IMPORTS.strip(), *_imports(backend, store)]),
        store.source if store else "",
        "\n".join([f"persistence = {store.recipe.build}()",
                   "set_flow_persistence_factory(lambda: persistence)  # what @persist() and pauses use"]
                  if store else [
                      'persistence = SQLiteFlowPersistence("flows.db")',
                      'set_flow_persistence_factory(lambda: SQLiteFlowPersistence("flows.db"))'
                      "  # for flows restored or built without persistence="]),
        flow_source(workflow, persist),
        "\n\n\n".join(_readers(text, backend, check, isolated)),
        "\n".join([
            *([f"BARRIER = multiprocessing.Barrier({racers})  # racers wait here until all have read"]
              if any("BARRIER." in c for c in _all_calls(steps)) else []),
            *(["BAD_OUTPUT = None  # the task that writes a value outside the state schema"]
              if any(s.bad_output is not None for s in steps) else []),
            *([f"ID = {kept}  # flow ids by run{where}"] if "ID[" in text else []),
            *([f"AT_GATE = {kept}  # the checkpoint each run paused at, by gate{where}"]
              if "AT_GATE[" in text else [])]),
    ]))


def _environment() -> list:
    """Before CrewAI is imported: every file it writes goes into WORKDIR (the current directory
    and HOME), and nothing phones home (``SCRIPT_SWITCHES``)."""
    env = ", ".join(f"{k}={sandbox.SWITCHES[k]!r}" for k in SCRIPT_SWITCHES)
    return ["os.chdir(WORKDIR)  # CrewAI writes under the current directory and HOME",
            "os.environ.update(HOME=WORKDIR, XDG_DATA_HOME=WORKDIR,  # no telemetry, version check, "
            "trace prompt",
            f"                  {env})"]


def _imports(backend: str, store) -> list:
    """CrewAI's imports besides the flow's (``workflow.IMPORTS``): the persistence factory, the
    backend's checkpoint provider, a custom store's."""
    lines = ["from crewai.flow.persistence.factory import set_flow_persistence_factory"]
    if backend == "json":
        lines.append("from crewai.state import CheckpointConfig, JsonProvider as PROVIDER")
    if backend == "sqlite":
        lines += ["from crewai.state import CheckpointConfig, SqliteProvider as PROVIDER",
                  "from crewai.state.provider import sqlite_provider",
                  "import pysqlite3.dbapi2 as SQLITE",
                  "sqlite_provider.sqlite3 = SQLITE  # it stores jsonb(): SQLite >= 3.45, not every "
                  "Python's"]
    return lines + list(store.imports if store else ())


def _readers(text: str, backend: str, check, isolated: bool) -> list:
    """The source of each reader the calls (``text``) or the check name."""
    checkpointed = backend in ("json", "sqlite")
    listed = checkpointed and any(f"{name}(" in text for name in (
        "latest_checkpoint", "checkpoint_at_gate", "read_state"))
    out = [without_docstring(inspect.getsource(checkpointing))] if "checkpointing(" in text else []
    if listed:
        out.append(source_as(checkpoints_json if backend == "json" else checkpoints_sqlite, "checkpoints"))
    out += [without_docstring(inspect.getsource(f)) for f in (latest_checkpoint, checkpoint_at_gate)
            if f"{f.__name__}(" in text]
    if "read_state(" in text:
        out.append(source_as(read_state_checkpoint if checkpointed else read_state_persist, "read_state"))
    if isolated and ("ID[" in text or "AT_GATE[" in text):
        out.append(without_docstring(inspect.getsource(Kept)))
    if check.reads_outcome:
        out.append(without_docstring(inspect.getsource(outcome)))
    return out


def _description(variant, store) -> str:
    """The variant in words; a custom store named by its class, not by our factory."""
    if store is None:
        return variant.description
    return re.sub(r"persistence from \S+ \(", f"{store.cls} (", variant.description)


def in_crewai_terms(check, calls: list):
    """``check`` with its expected and observed text in CrewAI's words, naming the call that
    diverged (``kickoff()``, ``resume('a')``) rather than "the call"."""
    found = re.findall(r"\.(kickoff\(\)|resume\('[^']*'\)|kickoff)", calls[-1]) if calls else []
    name = {"kickoff": "kickoff()"}.get(found[-1], found[-1]) if found else "the call"

    def say(text):
        for pattern, words in WORDS:
            text = re.sub(pattern, words, text)
        return text.replace("the call ", f"{name} ", 1)
    return replace(check, expected=say(check.expected), observed=say(check.observed))


def _twin_differs(evidence) -> bool:
    """A twin recovery whose copy's outcome or effects differ from the original's, which the
    contract allows (a NondetRecovery that only the copy shows)."""
    main = evidence.observed[evidence.step]
    return (evidence.ops[evidence.step].name == "twin_recover" and main.twin is not None
            and (main.outcome, effect_rows(main)) != (main.twin.outcome, effect_rows(main.twin)))


def _with_twin(script: str, evidence, isolated: bool) -> str:
    """``script`` whose last step recovers the store after a byte copy of it is taken
    (``COPY``), then recovers the copy with the same calls, checked against the first: the
    engine's twin recovery."""
    lines = script.splitlines()
    end = next(i for i, line in enumerate(lines) if line.startswith("# Expected: "))
    start = next(i for i, line in enumerate(lines) if line.startswith(f"# {evidence.step + 1}. "))
    run = next(line for line in lines[start:end] if line.startswith(("status = ", "status, fired = ")))
    call = run.partition(" = ")[2]  # in_child(step_n), or observe(...)
    again = ["before = len(effects())", f"twin = {call}, effects()[before:]"] if isolated else [f"twin = {call}"]
    main = evidence.observed[evidence.step]
    said = in_crewai_terms(Check(
        aspect="outcome", allowed=(),
        expected="the copy recovers as the store did: the same outcome, the same tasks run",
        observed=f"the store: the call {OUTCOME_WORDS[main.outcome]}, {ran(effect_rows(main))}; "
                 f"the copy: {OUTCOME_WORDS[main.twin.outcome]}, {ran(effect_rows(main.twin))}"),
        _step_calls(evidence, evidence.step))
    return "\n".join([
        *lines[: start + 1], *COPY, *lines[start + 1: end],
        'os.chdir("copy")  # CrewAI stores paths relative to the current directory',
        *again,
        f"# Expected: {said.expected}", f"# Observed: {said.observed}",
        "verdict('the recovery of the copy (outcome, effects fired)', twin, [(status, fired)])"]) + "\n"


@dataclass(frozen=True, slots=True)
class StoreParts:
    """A custom store in a script: its factory's ``ScriptStore`` (``recipe``), the class it
    builds (``cls``), and ``store_parts``'s standard-library modules, imports and source."""

    recipe: object
    cls: str
    stdlib: tuple
    imports: tuple
    source: str


def custom_store(options) -> StoreParts | None:
    """The script's store for a custom backend (``--store``), as its factory's ``ScriptStore``
    builds it; None when the factory declares none."""
    from adapters import storefactory

    recipe = storefactory.script_of(storefactory.load(options["store_factory"]))
    if recipe is None:
        return None
    return StoreParts(recipe, store_class(recipe), *store_parts(recipe))
