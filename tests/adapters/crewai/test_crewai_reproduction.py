"""CrewAI reproduction scripts: composed from the calls the case recorded, short, in CrewAI's
terms, standalone, and their exit status is the verdict: 1 on a known finding, 0 on a trace
CrewAI gets right.

Each test runs ``resumefuzz report`` in a fresh interpreter (the runner forks its workers from a
process that has run no flow: CrewAI starts event-bus threads on the first one) on a copy of a
corpus entry, then reads the script the report holds and the count the entry records.
"""

from __future__ import annotations

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
