"""Trims of the AutoGen reproduction script (``repro.py``): each written form says what the
longer one said, and the scripts of the corpus entries they shorten still show their defect."""

from __future__ import annotations

import copy
import json
import sqlite3
from pathlib import Path

import pytest

from adapters.autogen import repro, statefmt

from test_autogen_reproduction import CORPUS, HARNESS, _body, reproduce
from test_autogen_repro_team import _state, _output, _without_ids

from fuzz.rate import Rate
from fuzz.testing import check_standalone

FORGED_JSON = CORPUS / "graphflow-loop-step-json" / "InvalidPersist-6fb42ff8fa72.json"
FORGED_SQLITE = CORPUS / "graphflow-loopany-hitl-sqlite" / "InvalidPersist-37cfa0fe6ae2.json"
FORGED_SQLITE_STEP = CORPUS / "graphflow-loopany-step-sqlite" / "InvalidPersist-5473cfea2299.json"
STALE = CORPUS / "graphflow-loop-hitl-sqlite" / "DoubleConsume-7f8b90e4dd90.json"
RUN = "result = await team.run(task=TextMessage(source='user', content='start'))"


def test_a_result_nothing_reads_is_not_named():
    assert repro._unread_results([RUN, "save('run-1', await team.save_state())"]) == [
        "await team.run(task=TextMessage(source='user', content='start'))",
        "save('run-1', await team.save_state())"]
    looped = ["for _ in range(3):", "    " + RUN.replace("team.", "team_1.")]
    assert repro._unread_results(looped) == ["for _ in range(3):",
                                             "    await team_1.run(task=TextMessage(source='user', content='start'))"]
    read = [RUN, "outcome(result)"]
    assert repro._unread_results(read) == read


def test_the_held_state_is_loaded_where_it_is_used():
    stale = ["team = build_team()", "state = load('run-1', 'interrupt:t1')  # held since gate 1 asked",
             "await team.load_state(state)", RUN]
    assert repro._held_state_loaded(stale) == [
        "team = build_team()", "await team.load_state(load('run-1', 'interrupt:t1'))  # held since gate 1 asked", RUN]
    fork = ["team = build_team()", "state = load('run-1', 'interrupt:t1')", "await team.load_state(state)",
            "save('branch-1', state, 'interrupt:t1')", RUN]
    assert repro._held_state_loaded(fork) == fork  # the fork saves the state again


def test_a_team_that_only_loads_is_built_where_it_loads():
    loads = ["team = build_team()", "await team.load_state(load('run-1'))"]
    assert repro._team_built_where_used(loads) == ["await build_team().load_state(load('run-1'))"]
    runs = [*loads, "await team.run(task=None)"]
    assert repro._team_built_where_used(runs) == runs
    script = ("async def step_3():\n    await build_team().load_state(load('run-1'))\n"
              "    result = None  # load_state() took it, no message in it asks: nothing to run\n"
              "    return 'completed'\n")
    assert repro._nothing_run_returned(script) == (
        "async def step_3():\n    await build_team().load_state(load('run-1'))\n"
        "    return 'completed'  # load_state() took it, no message in it asks: nothing to run\n")


@pytest.mark.parametrize("outputs,done,answers", [
    ([], [1], {1: "a"}),
    ([], [1], {}),
    ([_output(1, "a")], [1, 2], {1: "a"}),
    ([_output(1, None)], [1, 2], {2: "b"}),
])
def test_the_forgery_written_in_its_step_writes_what_statefmt_writes(outputs, done, answers):
    """With the answers read (``read_state``): the output as ``statefmt.rewrite`` writes it; else
    the same message with the one field the script's ``TaskOutput`` keeps."""
    state = _state(outputs)
    state["agent_states"]["GraphManager"] = state["agent_states"].pop("manager")
    call = f"save('run-1', rewrite(load('run-1'), {done!r}, {answers!r}))"
    expected = _without_ids(statefmt.rewrite(state, done, answers))
    for reads_answers in (True, False):
        lines = repro._forged_in_place((call,), "GraphManager", reads_answers)
        assert lines[0] == "state = load('run-1')" and lines[-1] == "save('run-1', state)"
        assert all(len(line) <= repro.LONGEST for line in lines)
        saved = {}
        namespace = {**vars(repro), "load": lambda thread: copy.deepcopy(state),
                     "save": lambda thread, s: saved.setdefault(thread, s)}
        if not reads_answers:  # the script's TaskOutput: ``out`` alone
            exec(repro._one_line_output("class TaskOutput(BaseModel):\n    out: int"), namespace)
        exec("\n".join(lines), namespace)
        written = _without_ids(saved["run-1"])
        if not reads_answers:
            new = expected["agent_states"]["GraphManager"]["message_thread"][-1]["content"]
            expected["agent_states"]["GraphManager"]["message_thread"][-1]["content"] = {"out": new["out"]}
        assert written == expected


def test_the_one_overwrite_of_the_store_in_memory_is_its_sql():
    lines = repro._overwritten_in_place(("state = {'n': 3}", "overwrite('run-1', state)"), "overwrite('run-1', state)")
    assert "def overwrite" not in "\n".join(lines) and lines[1].startswith('DB.execute("UPDATE saves SET state')
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.execute("CREATE TABLE saves (thread, label, state)")
    for thread, n in (("run-1", 1), ("run-1", 2), ("run-2", 9)):
        db.execute("INSERT INTO saves VALUES (?, '', ?)", (thread, json.dumps({"n": n})))
    exec("\n".join(lines), {"DB": db, "json": json})
    assert [json.loads(s) for (s,) in db.execute("SELECT state FROM saves ORDER BY rowid")] == [
        {"n": 1}, {"n": 3}, {"n": 9}]
    twice = ("overwrite('run-1', state)", "overwrite('run-1', state)")
    assert repro._overwritten_in_place(twice, "\n".join(twice)) == twice  # more than one: the helper


def test_the_labelled_load_of_a_saved_run_names_its_query():
    every = "save('run-1', await team.save_state(), 'interrupt:t1')\nawait team.load_state(load('run-1', 'interrupt:t1'))"
    check = type("Check", (), {"reads_state": False})()
    ops = [type("Op", (), {"name": "start", "thread": "t0"})()]
    store, opening, _ = repro._store(every, True, check, ops, shared=True)
    source = "\n".join(repro._folded(src) for src in store)
    assert 'NEWEST = "SELECT state FROM saves WHERE thread = ? AND label LIKE ? ORDER BY rowid DESC"' in source
    assert 'def load(thread, label="%"): return json.loads(DB.execute(NEWEST, (thread, label)).fetchone()[0])' in source
    namespace = {}
    exec("import json, sqlite3\n" + "\n".join([*opening, source]), namespace)
    namespace["save"]("run-1", {"n": 1}, "interrupt:t1")
    namespace["save"]("run-1", {"n": 2}, "complete")
    assert namespace["load"]("run-1") == {"n": 2}
    assert namespace["load"]("run-1", "interrupt:t1") == {"n": 1}


def test_every_task_a_gate_asks_until_answered_with_no_value_to_name():
    agent = repro._task_source("loop", 1, True, True, False).replace("task=self.t, ", "").replace(", answer=value", "")
    agent = repro._every_task_a_gate(without_crash_points(agent))
    assert "value" not in agent
    assert 'if not said.startswith("resume:"):  # every task is a gate: it asks until it is answered' in agent
    assert 'effect(self.t, said.removeprefix("resume:"))' in agent
    assert "self.t, self.kind = t, kind" in agent  # the "end" leaf is told by its kind
    no_end = repro._task_source("handoff", 1, True, False, False).replace("task=self.t, ", "").replace(
        ", answer=value", "")
    assert "self.kind" not in repro._every_task_a_gate(without_crash_points(no_end))
    answered = repro._task_source("loop", 1, True, True, False)  # the answer read twice (its output's too)
    assert repro._every_task_a_gate(answered) == answered


def without_crash_points(agent):
    return "\n".join(line for line in agent.splitlines() if "crash_point(" not in line)


@pytest.mark.parametrize("path", [FORGED_JSON, FORGED_SQLITE, FORGED_SQLITE_STEP])
def test_a_forged_output_that_load_state_takes_is_shown_in_60_lines(adapter, path):
    repro_ = reproduce(adapter, path)
    assert repro_.checked and repro_.reproduces == Rate(1, 1), repro_.outputs
    body = _body(repro_.script)
    assert repro_.lines <= 60, repro_.script
    assert "class TaskOutput(BaseModel): out: int\n" in body  # nothing reads a task number or answer
    assert "def rewrite(" not in body and "result = " not in body
    assert ("async def step_3():\n    await build_team().load_state(load('run-1'))\n"
            "    return 'completed'  # load_state() took it, no message in it asks: nothing to run\n") in body
    check_standalone(repro_.script, HARNESS)


def test_a_stale_resume_counts_the_effects_the_task_logs_itself(adapter):
    repro_ = reproduce(adapter, STALE)
    assert repro_.checked and repro_.reproduces == Rate(1, 1), repro_.outputs
    body = _body(repro_.script)
    assert "def effect(" not in body and "fired" not in body.replace("'effects fired'", "")
    assert '        EFFECTS.append((self.t, said.removeprefix("resume:")))  # its one effect\n' in body
    assert "verdict('effects fired', sorted(EFFECTS[before:], key=repr), [[]])" in body
    assert "    await team.load_state(load('run-1', 'interrupt:t1'))  # held since gate 1 asked\n" in body
    # 63 before 2026-12-07: +1, the line that makes an exception before the verdict exit 2
    assert repro_.lines <= 64, repro_.script
    check_standalone(repro_.script, HARNESS)
