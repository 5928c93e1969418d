"""The CrewAI adapter under the engine's own runner: SIGKILL barriers, races, twins, no network.

Each variant runs ``engine_probe.py`` in a fresh interpreter (the runner forks workers from a
parent that has imported CrewAI but run nothing).  Machinery only: where the worker died, which
effects the ledger holds, how many processes raced, that both twins ran; never a verdict.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from crewai_test_support import ATTEMPTS, FRAMEWORK_RACE, HERE, PYTHON, VARIANTS, require_crewai

require_crewai()

ROOT = HERE.parents[2]


@pytest.fixture(scope="module", params=VARIANTS)
def probe(request, tmp_path_factory):
    """The probe's facts; run again (up to ATTEMPTS) when CrewAI's checkpoint writer raced its
    event record in a scenario's last attempt (see ``crewai_test_support.FrameworkRace``; the
    probe itself runs a raced scenario again first, up to ATTEMPTS times)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for _ in range(ATTEMPTS):
        out = tmp_path_factory.mktemp(request.param)
        done = subprocess.run(
            [PYTHON, str(HERE / "engine_probe.py"), request.param, str(out)],
            capture_output=True, text=True, timeout=900, env=env, cwd=out,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        facts = json.loads(done.stdout.strip().splitlines()[-1])
        logs = [line for value in facts.values() if isinstance(value, dict) for line in value.get("log", ())]
        if not any(FRAMEWORK_RACE in line for line in logs):
            return facts
    raise AssertionError(f"CrewAI's checkpoint writer raced in {ATTEMPTS} probe runs: {logs}")


def scenario(probe, name):
    return probe[name]


@pytest.mark.slow
def test_sigkill_in_flight_kills_the_worker_after_the_effect(probe):
    facts = scenario(probe, "in_flight")
    assert facts["outcome"] == "crashed"
    assert [tuple(e) for e in facts["effects"]] == [("t0", 1, None)]
    if facts["recover_pids"]:  # recovery ran in a fresh worker, not in the killed one
        assert set(facts["recover_pids"]).isdisjoint(facts["pids"])


@pytest.mark.slow
def test_sigkill_before_effect_inside_resume(probe):
    facts = scenario(probe, "resume_before_effect")
    assert facts["start_outcome"] == "interrupted"
    assert facts["outcome"] == "crashed"
    assert facts["effects"] == []  # killed as the gated task began: its effect never fired


@pytest.mark.slow
def test_race_runs_k_processes_on_one_store(probe):
    facts = scenario(probe, "race")
    assert len(facts["outcome"].split("|")) == 2  # one answer per racer process
    assert facts["main_worker_pid"] not in facts["pids"]  # effects came from the racers
    assert len(facts["pids"]) <= 2


@pytest.mark.slow
def test_twin_recover_runs_both_copies(probe):
    facts = scenario(probe, "twin")
    assert facts["killed"] == "crashed"
    assert facts["twin_outcome"] is not None


@pytest.mark.slow
def test_no_connection_attempt_leaves_the_machine(probe):
    assert probe["netguard"] == []


# Forces ``reuse_worker`` on a CrewAI variant, runs three cases in one Session and prints what
# the runner saw.  In a fresh interpreter: the parent must have imported CrewAI and run nothing.
_FORCED_REUSE = """
import json, sys, tempfile
from dataclasses import replace
from pathlib import Path
from fuzz.runner import Session, Settings
from fuzz.targets import prepare, resolve
from fuzz.testing import run_cases
from refmodel import Start, Workflow
adapter = prepare(resolve("crewai"))
declared = type(adapter).tuning
type(adapter).tuning = lambda self, v: replace(declared(self, v), reuse_worker=True)
variant = next(v for v in adapter.variants() if v.name == sys.argv[1])
# Spares cold: a warmed one's throwaway case leaves the same behind, and would be counted too.
with Session(adapter, variant, Path(tempfile.mkdtemp()), Settings(warm_spares=False)) as session:
    pids, _ = run_cases(session, Workflow(2, {1}, ("a", "b")), [Start("t0")], 3)
    print(json.dumps({"declared": declared(adapter, variant).reuse_worker, "pids": pids,
                      "left": session.left_behind, "last": session.last_left}))
"""


def test_a_worker_whose_crewai_case_left_its_event_bus_running_is_not_reused(tmp_path):
    """CrewAI declares no ``reuse_worker``: its event bus starts threads and an event loop
    (``CrewAIEventsLoop``, ``CrewAISyncHandler_*``) that outlive a flow.  Forced on here, the
    worker's own check sees them after every case and exits instead of serving the next: the
    check that stands behind every adapter's declaration, shown on a real framework."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([PYTHON, "-c", _FORCED_REUSE, "persist-sqlite"], capture_output=True,
                          text=True, timeout=600, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["declared"] is False
    assert len(set(seen["pids"])) == 3 and seen["left"] == 3
    assert "CrewAIEventsLoop" in seen["last"], seen["last"]
