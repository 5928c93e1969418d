"""CrewAI reproduction scripts: the case's own flow and the calls the case recorded, in CrewAI's
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
    from adapters.crewai.workflow import flow_source
    from refmodel.workflow import Workflow

    recorded, script = report(BAD_OUTPUT, tmp_path)
    assert recorded == {"checked": True, "lines": len(script.splitlines()), "runs": 1,
                        "reproduced": 1}, script
    # The flow is the one the case imports, written once and as it is.
    workflow = Workflow.from_json(json.loads(BAD_OUTPUT.read_text())["workflow"])
    assert flow_source(workflow, 'SQLiteFlowPersistence("flows.db")') in script
    assert "    flow = WorkflowFlow()\n    return outcome(flow.kickoff())\n" in script
    assert "# Expected: kickoff() raises an error\n# Observed: kickoff() completes" in script
    check_standalone(script, HARNESS)


@pytest.mark.slow
def test_a_race_runs_its_resumes_in_child_processes(tmp_path):
    recorded, script = report(RACE, tmp_path, runs=0)
    assert recorded["checked"], script
    # Both racers resume with 'a', each in its own process, at once.
    assert "def racer_1():" in script and "race(racer_1, racer_2)" in script
    assert script.count(".resume('a')") == 2, script
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
    assert recorded["checked"], script
    assert "shutil.copytree(" in script and 'os.chdir("copy")' in script
    assert script.count("in_child(step_2)") == 2, script
    assert "verdict('the recovery of the copy (outcome, effects fired)', twin, [(status, fired)])" \
        in script
    check_standalone(script, HARNESS)
