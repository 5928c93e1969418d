"""CrewAI reproduction scripts: composed from the calls the case recorded, short, in CrewAI's
terms, standalone, and their exit status is the verdict: 1 on a known finding, 0 on a trace
CrewAI gets right.

Each test runs ``resumefuzz report`` in a fresh interpreter (the runner forks its workers from a
process that has run no flow: CrewAI starts event-bus threads on the first one) on a copy of a
corpus entry, then reads the script the report holds and the count the entry records.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess

import pytest

from fuzz.testing import check_standalone, defect_entries
from crewai_test_support import HERE, PYTHON, require_crewai

require_crewai()

ROOT = HERE.parents[2]
CORPUS = ROOT / "corpus" / "crewai"
BAD_OUTPUT = CORPUS / "persist-sqlite" / "InvalidPersist-94cdcc0c57f8.json"
RACE = CORPUS / "persist-sqlite" / "LostUpdate-dcfd68383090.json"
HARNESS = ('hooks', 'H.')  # and fuzz.testing.HARNESS_WORDS


def report(entry, tmp_path, runs: int = 1, doc: dict | None = None) -> tuple[dict, str]:
    """``resumefuzz report COPY --verify runs`` on a copy of ``entry`` (or on ``doc`` written
    where ``entry`` is): (the copy's ``finding.script``, the script)."""
    copy = tmp_path / "corpus" / entry.parent.name / entry.name
    copy.parent.mkdir(parents=True, exist_ok=True)
    if doc is not None:
        copy.write_text(json.dumps(doc))
    else:
        shutil.copy(entry, copy)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([PYTHON, "-m", "fuzz", "report", str(copy), "--verify", str(runs),
                           "--reports", str(tmp_path / "reports")],
                          capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    (md,) = (tmp_path / "reports").rglob("*.md")
    script = re.search(r"```python\n(.*?)```", md.read_text(), re.S)[1]
    return json.loads(copy.read_text())["finding"]["script"], script


@pytest.mark.slow
def test_an_output_outside_the_schema_is_accepted_exits_1(tmp_path):
    """Task 1 writes a string into ``done: list[int]``; the flow completes where the contract
    wants a refusal."""
    recorded, script = report(BAD_OUTPUT, tmp_path)
    assert recorded == {"checked": True, "lines": len(script.splitlines()), "runs": 1,
                        "reproduced": 1}, script
    assert recorded["lines"] <= 60, script
    assert "@persist(SQLiteFlowPersistence(" in script and "WorkflowFlow().kickoff()" in script
    assert "# Expected: kickoff() raises an error\n# Observed: kickoff() completes" in script
    check_standalone(script, HARNESS)


@pytest.mark.slow
def test_a_race_runs_its_resumes_in_child_processes(tmp_path):
    recorded, script = report(RACE, tmp_path, runs=0)
    assert recorded["checked"] and recorded["lines"] <= 120, script
    # Both racers resume with 'a': one racer function, run in two processes at once.
    assert "def racer():" in script and "race(racer, racer)" in script and ".resume('a')" in script
    check_standalone(script, HARNESS)


@pytest.mark.slow
def test_what_crewai_gets_right_exits_0(tmp_path):
    """Start and resume with 'a', recorded as if the resume had fired nothing: the script sees
    task 1 fire with 'a', which the contract allows, so it exits 0."""
    trace = json.loads(RACE.read_text())
    resume = {"op": "resume", "thread": "t0", "crash": None, "bad_output": None, "value": "a",
              "gate": None}
    wrong = dict(trace["observations"][1], outcome="completed", effects=[])
    trace.update(operations=[trace["operations"][0], resume],
                 observations=[trace["observations"][0], wrong])
    trace["finding"] = dict(trace["finding"], category="Unclassified", step=1)
    trace["finding"].pop("script", None)
    recorded, script = report(RACE, tmp_path, doc=trace)
    assert recorded["checked"] and recorded["reproduced"] == 0, script
    assert recorded["lines"] <= 60, script
    check_standalone(script, HARNESS)



def test_a_stale_resume_is_the_same_from_pending_call_again(tmp_path):
    """The handle of a ``@persist`` flow is its flow id: answering through it again is
    ``from_pending(id).resume(v)`` once more, which the script makes and checks."""
    found = defect_entries(CORPUS, "stale_resume")
    assert found, "no FAILED ✗ entry ending in stale_resume left in the corpus"
    checked, script = report(found[0], tmp_path)
    assert checked["checked"] and (checked["reproduced"], checked["runs"]) == (1, 1), script
    assert "through the handle obtained while task" in script
    assert script.count(".resume('") >= 2
    check_standalone(script, HARNESS)


@pytest.mark.slow
def test_a_recovery_only_the_copy_shows_copies_the_store_first(tmp_path):
    """A NondetRecovery that only the twin recovery shows: the script copies the store as the
    engine's clone does (bytes, directory order, fresh mtimes), recovers the original, then the
    copy with the same calls, and checks the copy's outcome and effects against the
    original's.  Which checkpoint the copy finds latest depends on the order it was written in,
    so the rate is not pinned (runs=0)."""
    found = [p for p in sorted(CORPUS.rglob("NondetRecovery-*.json"))
             if json.loads(p.read_text())["operations"][-1]["op"] == "twin_recover"]
    assert found, "no NondetRecovery entry ending in twin_recover left in the corpus"
    recorded, script = report(found[0], tmp_path, runs=0)
    assert recorded["checked"] and recorded["lines"] <= 120, script
    assert "shutil.copytree(" in script and 'os.chdir("copy")' in script
    assert script.count("in_child(step_2)") == 2, script
    assert "verdict('the recovery of the copy (outcome, effects fired)', twin, [(status, fired)])" \
        in script
    check_standalone(script, HARNESS)


@pytest.mark.parametrize("backend", ["json", "sqlite"])
def test_checkpoints_only_the_gate_finder_reads_are_listed_in_it(backend):
    """Where ``checkpoint_at_gate`` alone lists the checkpoints, the listing is written into its
    loop (no ``checkpoints`` of its own), newest first as before; with another reader of the
    list (``latest_checkpoint``), both keep calling ``checkpoints``.  The inlined finder runs:
    it picks the newest checkpoint paused at the gate, as the two-function form does."""
    from adapters.crewai import repro

    alone = repro._source(repro.checkpoint_at_gate, "checkpoints", backend=backend)
    assert "def checkpoints(" not in alone and "checkpoints(location)" not in alone
    assert alone.count("\n") == repro._source(repro.checkpoint_at_gate, backend=backend).count("\n") + 1
    shared = repro._source("checkpoints", repro.latest_checkpoint, repro.checkpoint_at_gate,
                           backend=backend)
    assert "def checkpoints(" in shared and "for loc in reversed(checkpoints(location)):" in shared
    listing = repro._source("checkpoints", repro.latest_checkpoint, backend=backend)
    found = []

    class Provider:  # the documents the finder reads, by location: paused at gate 2 or not
        def from_checkpoint(self, loc):
            paused = "gate_2" if loc != last else "gate_3"
            return json.dumps({"trigger": "method_execution_paused", "event_record": {"nodes": {
                "n": {"event": {"type": "method_execution_paused", "method_name": paused}}}}})

    import glob as glob_module
    import sqlite3
    import tempfile
    where = tempfile.mkdtemp()
    if backend == "json":
        location = where
        for k in range(3):
            path = os.path.join(where, f"c{k}.json")
            open(path, "w").write("{}")
            os.utime(path, ns=(k, k))
        last = os.path.join(where, "c2.json")
    else:
        location = os.path.join(where, "ck.db")
        with sqlite3.connect(location) as db:
            db.execute("CREATE TABLE checkpoints (id)")
            db.executemany("INSERT INTO checkpoints VALUES (?)", [("x",), ("y",), ("z",)])
        last = f"{location}#z"
    for src in (alone, listing + "\n" + repro._source(repro.checkpoint_at_gate, backend=backend)):
        scope = {"glob": glob_module, "os": os, "json": json, "SQLITE": sqlite3, "PROVIDER": Provider}
        exec(src, scope)
        found.append(scope["checkpoint_at_gate"](location, 2))
    assert found[0] == found[1] and found[0] is not None and found[0] != last


@pytest.mark.parametrize("backend", ["json", "sqlite"])
def test_a_flow_with_one_gate_finds_its_pause_by_the_trigger_alone(backend):
    """With one gate the flow can pause there alone: ``checkpoint_at_gate`` is the newest
    checkpoint written as the flow paused, whatever its event record says, and the listing is
    still written into it."""
    from adapters.crewai import repro

    src = repro._source(repro.checkpoint_at_gate, "checkpoints", backend=backend, one_gate=True)
    assert "def checkpoints(" not in src and "event_record" not in src
    assert len(src.splitlines()) < len(repro._source(repro.checkpoint_at_gate, "checkpoints",
                                                      backend=backend).splitlines())

    class Provider:  # oldest first: paused, paused, then finished (the resume after it)
        def from_checkpoint(self, loc):
            trigger = "method_execution_finished" if loc == last else "method_execution_paused"
            return json.dumps({"trigger": trigger})

    import glob as glob_module
    import sqlite3
    import tempfile
    where = tempfile.mkdtemp()
    if backend == "json":
        location, names = where, [os.path.join(where, f"c{k}.json") for k in range(3)]
        for k, path in enumerate(names):
            open(path, "w").write("{}")
            os.utime(path, ns=(k, k))
        last, paused = names[2], names[1]
    else:
        location = os.path.join(where, "ck.db")
        with sqlite3.connect(location) as db:
            db.execute("CREATE TABLE checkpoints (id)")
            db.executemany("INSERT INTO checkpoints VALUES (?)", [("x",), ("y",), ("z",)])
        last, paused = f"{location}#z", f"{location}#y"
    scope = {"glob": glob_module, "os": os, "json": json, "SQLITE": sqlite3, "PROVIDER": Provider}
    exec(src, scope)
    assert scope["checkpoint_at_gate"](location, 2) == paused


def _fork_evidence(allowed_outcome: str):
    from adapters.protocol import Evidence, Fork, Start
    from refmodel.ops import Observation
    from refmodel.workflow import StateView, Workflow

    wf = Workflow(4, frozenset({2, 3}), ("a", "b"))
    ops = (Start("t0"), Fork("t0", gate=2, value="a", new_thread="f1"))
    observed = (Observation("interrupted", (("t0", 1, None),), StateView.of(wf, [1], {}, 2)),
                Observation("rejected", (("f1", 1, None),), StateView.of(wf, [1, "<bad>"], {}, 2)))
    allowed = (Observation(allowed_outcome, (("f1", 2, "a"),),
                           StateView.of(wf, [1, 2], {2: "a"}, 3 if allowed_outcome == "interrupted" else None)),)
    return wf, ops, Evidence(ops=ops, calls=(), observed=observed, step=1, allowed=allowed)


def test_the_flow_is_written_as_far_as_any_run_of_the_trace_goes():
    """No run, allowed or observed, goes past the gate of task 3: the flow stops there (its
    gate, with no task listening), tasks 3 and 4 left out; where one may run to the end, the
    whole flow."""
    from adapters.crewai import repro

    wf, ops, evidence = _fork_evidence("interrupted")
    assert repro._reach(evidence, ops, wf) == (2, 3)
    src = repro.flow_class(wf, None, set(), reach=(2, 3))
    assert "def gate_3(self)" in src and "task_3" not in src and "tasks 3-4 left out" in src
    ast.parse(src)
    wf, ops, evidence = _fork_evidence("completed")
    assert repro._reach(evidence, ops, wf) is None
    assert "def task_4(self)" in repro.flow_class(wf, None, set(), reach=None)


SCRIPT = '''import contextvars, sys
EFFECTS = []
def effect(task, value):
    EFFECTS.append((task, value))
def verdict(what, observed, allowed):
    sys.exit(0 if observed in allowed else 1)
def task_body(t, value):
    effect(t, value)
    return t
def outcome(result):
    return "interrupted" if isinstance(result, HumanFeedbackPending) else "completed"
AT_GATE = {}
# 1. Start run-1
def step_1():
    run(1)
    AT_GATE['run-1', 2] = checkpoint_at_gate('ck/run-1', 2)
contextvars.copy_context().run(step_1)
# 2. Resume run-1
def step_2():
    return outcome(resume('a'))
before = len(EFFECTS)
status = step_2()
fired = EFFECTS[before:]
# Expected: ...
verdict('effects fired', sorted(fired, key=repr), [[(2, 'a')]])
'''


def test_what_a_script_says_once_is_written_where_it_is_read():
    """The list log's ``effect`` in ``task_body``, one line; a step's checkpoint lookups after
    its call's fresh context; ``outcome`` and ``fired`` where their one reader reads them: the
    same statements in the same order, run the same way."""
    from adapters.crewai import repro

    out = repro._outcome_inlined(repro.fired_inlined(repro._effect_in_task(repro._lookups_after(SCRIPT))))
    assert "def effect(" not in out and "def outcome(" not in out and "fired = " not in out
    assert "def task_body(t, value): EFFECTS.append((t, value)); return t" in out
    assert ("contextvars.copy_context().run(\n    lambda: run(1))\n"
            "AT_GATE['run-1', 2] = checkpoint_at_gate('ck/run-1', 2)\n") in out
    assert ("    result = resume('a')\n"
            '    return "interrupted" if isinstance(result, HumanFeedbackPending) else "completed"\n') in out
    assert out.endswith("verdict('effects fired', sorted(EFFECTS[before:], key=repr), [[(2, 'a')]])\n")
    assert len(out.splitlines()) == len(SCRIPT.splitlines()) - 7
    log = []

    def run(scope, text):
        scope.update(HumanFeedbackPending=KeyError, run=lambda t: log.append(("run", scope["task_body"](t, None))),
                     resume=lambda v: log.append(("resume", scope["task_body"](2, v))),
                     checkpoint_at_gate=lambda *a: log.append(("at", a)))
        with pytest.raises(SystemExit) as done:
            exec(text, scope)
        return done.value.code, list(log), scope["EFFECTS"]

    first = run({}, SCRIPT)
    log.clear()
    assert run({}, out) == first == (0, first[1], [(1, None), (2, "a")])
    assert repro._effect_in_task(out) == out and repro._lookups_after(out) == out


def test_a_script_over_the_budget_takes_the_compact_spellings():
    """``_compact``: the same imports, environment and checkpoint configuration in fewer lines;
    ``checkpointing`` keeps its ``restore_from`` where a call passes one."""
    from adapters.crewai import repro

    plain = "\n".join([
        *repro._environment(),
        "from crewai.flow.async_feedback import HumanFeedbackPending",
        "from crewai.flow.flow import Flow, FlowState, listen, start",
        "from crewai.flow.human_feedback import human_feedback",
        "from crewai.flow.persistence import SQLiteFlowPersistence",
        "from crewai.flow.persistence.factory import set_flow_persistence_factory",
        "from crewai.state import CheckpointConfig, SqliteProvider as PROVIDER",
        "from crewai.state.provider import sqlite_provider",
        "import pysqlite3.dbapi2 as SQLITE",
        repro._source(repro.checkpointing),
        'set_flow_persistence_factory(lambda: SQLiteFlowPersistence("flows.db"))',
        "flow = Flow(checkpoint=checkpointing('ck/run-1'))", ""])
    compact = repro._compact(plain)
    assert len(compact.splitlines()) == len(plain.splitlines()) - 5, compact
    assert "from crewai.flow import HumanFeedbackPending, human_feedback\n" in compact
    assert "factory.set_flow_persistence_factory(lambda:" in compact
    assert 'def checkpointing(location, on_events=["method_execution_finished", "method_execution_paused"]):' \
        in compact
    assert max(map(len, compact.splitlines())) <= 120
    ast.parse(compact)
    restoring = plain + "cfg = checkpointing('ck/run-1', AT_GATE['run-1', 2])\n"
    assert "restore_from=restore_from" in repro._compact(restoring)
