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
    event record in a scenario (see ``crewai_test_support.FrameworkRace``)."""
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
