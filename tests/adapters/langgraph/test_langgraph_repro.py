"""LangGraph reproduction scripts: the adapter's own workflow and the calls it recorded, in
LangGraph's terms, standalone, and their exit status is the verdict: 1 on a known defect
(with and without a SIGKILL), 0 on a trace LangGraph gets right."""

from __future__ import annotations

import inspect
from dataclasses import replace
from pathlib import Path

import pytest

from adapters.langgraph import workflow
from fuzz import reprocheck
from fuzz.rate import Rate
from fuzz.testing import check_standalone
from fuzz.trace import load_trace

CORPUS = Path(__file__).resolve().parents[3] / "corpus" / "langgraph"
# Entries the corpus no longer holds, kept for a script path nothing else exercises: ones the
# minimizer shortened by another route (a forged tamper of an interrupted functional run: its
# @task results, ``forge_results``), and ones retired when forged tampers and a TypedDict
# state's BadOutput became n/a (issue 41: LangGraph offers no integrity record and validates no
# TypedDict), whose scripts stay what a user of such a store would run.
DATA = Path(__file__).resolve().parent / "data"
# A fork of a forked checkpoint that fires the first fork's answer (graph API, Command spelling).
# Found by glob: the minimizer may rewrite entries, so the tests do not name a fingerprint.
FORK_IGNORED = next(p for p in sorted((CORPUS / "sqlite-graph-sync-head-command").glob(
    "ForkIgnore-*.json")) if load_trace(p).status == "FAILED")
KILLED = CORPUS / "sqlite-func-exit-head-update" / "StateMismatch-b8bd2ba31656.json"
HARNESS = ('rf_branch',)  # and fuzz.testing.HARNESS_WORDS


def test_repro_a_fork_that_ignores_its_value_exits_1(adapter, variant):
    trace = load_trace(FORK_IGNORED)
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=1)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    # the workflow the case runs, pasted as it is
    for f in (workflow.build_graph, workflow.task_body, workflow.state_schema):
        assert inspect.getsource(f).strip() in repro.script, f
    check_standalone(repro.script, HARNESS, as_words=True)
    assert "graph.invoke(Command(resume=" in repro.script
    assert "# Expected: task 1 ran with '" in repro.script


def test_repro_with_a_sigkill_exits_1(adapter, variant):
    trace = load_trace(KILLED)
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=1)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    assert "in_child(step_1" in repro.script and "os.kill(os.getpid(), signal.SIGKILL)" in repro.script
    check_standalone(repro.script, HARNESS, as_words=True)


def test_repro_of_what_langgraph_gets_right_exits_0(adapter, variant):
    """The ForkIgnore entry's first step, then a resume, as if LangGraph had fired no effect where the resume
    fires task 1 with 'a': the script sees the effect, so it exits 0."""
    from refmodel import Observation, Resume

    trace = load_trace(FORK_IGNORED)
    start = trace.observations[0]
    wrong = Observation("interrupted", (), start.state)
    trace = trace.with_(operations=(trace.operations[0], Resume("t0", value="a")),
                        observations=(start, wrong),
                        finding=replace(trace.finding, category="Unclassified", step=1))
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=1)
    assert repro.checked and repro.reproduces == Rate(0, 1), repro.outputs
    assert "no defect" in repro.outputs[0]
    check_standalone(repro.script, HARNESS, as_words=True)


@pytest.mark.parametrize("name", ["postgres-graph-sync-head-update"])
def test_variants_without_a_checked_script_have_none(adapter, variant, name):
    """No script that only prints stands in for a checked one: the report gives the replay line
    (docs/decisions/0002-checked-scripts-only.md)."""
    trace = load_trace(FORK_IGNORED).with_(variant=name)
    repro = reprocheck.script_for(adapter, variant(name), trace, calls=((), ()))
    assert repro.script is None and not repro.checked and not repro.error


def test_repro_of_a_race_runs_the_racers_in_child_processes(adapter, variant):
    # The committed entry races on the forced schedule; its unforced twin is what this checks
    # (the minimizer may rewrite entries, so the test does not name a fingerprint).
    found = sorted((CORPUS / "sqlite-graph-sync-head-update").glob("LostUpdate-*.json"),
                   key=lambda p: len(load_trace(p).operations))  # the shortest
    assert found, "no LostUpdate entry left for sqlite-graph-sync-head-update"
    trace = load_trace(found[0])
    ops = tuple(replace(op, forced=False) if op.name == "race" else op
                for op in trace.operations)
    trace = trace.with_(operations=ops)
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=1)
    assert repro.checked, repro.script
    assert "race(racer_1, racer_2)" in repro.script
    check_standalone(repro.script, HARNESS, as_words=True)
    # Unforced, the race is timing-dependent: the run is counted, whatever it showed.
    assert repro.reproduces is not None and repro.reproduces.n == 1


@pytest.mark.parametrize("folder, pattern, needle", [
    # racers held at a barrier after their read (the harness's forced schedule, spelled with
    # the saver's public extension point): deterministic, so it must reproduce every time
    ("sqlite-func-sync-head-update", "LostUpdate-*.json", "HOLD.wait("),
    ("sqlite-graph-sync-head-update-pydantic", "InvalidPersist-*.json", "'state': 'pydantic'"),
    ("postgres-graph-sync-head-update", "InvalidPersist-*.json", "PostgresSaver(conn)"),
    ("postgres-func-sync-head-update", "LostUpdate-*.json",
     "HeldPostgresSaver(postgres_saver().conn)"),
])
def test_repro_of_forced_races_pydantic_state_and_postgres(adapter, variant, folder, pattern,
                                                          needle):
    found = [p for p in [*sorted((CORPUS / folder).glob(pattern)),
                         *sorted((DATA / folder).glob(pattern))]
             if load_trace(p).status == "FAILED"]
    assert found, f"no FAILED {pattern} entry left in {folder}"
    trace = load_trace(found[0])
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=1)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    assert needle in repro.script, repro.script
    check_standalone(repro.script, HARNESS, as_words=True)


def _forged_entry(folders: str, before: str):
    """The first FAILED entry under ``folders`` whose forged tamper hits a thread whose last
    run ended ``before`` (a finished run keeps its state elsewhere than an interrupted one;
    ``None``: either)."""
    for path in [*sorted(CORPUS.glob(f"{folders}/InvalidPersist-*.json")),
                 *sorted(DATA.glob(f"{folders}/InvalidPersist-*.json"))]:
        trace = load_trace(path)
        ops = trace.operations
        at = next((i for i, op in enumerate(ops) if op.name == "tamper" and op.how == "forged"), 0)
        runs = [i for i in range(at) if (getattr(ops[i], "new_thread", "") or ops[i].thread)
                == ops[at].thread and ops[i].name != "query"]
        last = trace.observations[runs[-1]].outcome if runs else None
        if trace.status == "FAILED" and runs and before in (None, last):
            return trace
    pytest.fail(f"no FAILED forged InvalidPersist entry under {folders} after {before!r}")


@pytest.mark.parametrize("folders, before, needles", [
    ("sqlite-graph-*", None, ("forge(", "{'done': [")),  # the state channels
    ("sqlite-func-*", "completed", ("forge(", "{'__end__': {'done': ")),
    ("sqlite-func-*", "interrupted", ("forge_results(",)),  # its @task results
    ("memory-func-*", "completed", ("forge_in_memory(", "{'__end__': {'done': ")),
    ("memory-graph-*", "completed", ("forge_in_memory(", "{'done': [")),
])
def test_repro_of_a_forged_checkpoint_writes_what_the_harness_wrote(adapter, variant, folders,
                                                                   before, needles):
    trace = _forged_entry(folders, before)
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=1)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    assert all(n in repro.script for n in needles), repro.script
    check_standalone(repro.script, HARNESS, as_words=True)


def test_repro_of_a_corrupted_memory_checkpoint_sees_langgraph_refuse(adapter, variant):
    """A fork of a thread whose InMemorySaver checkpoint was corrupted: LangGraph refuses, which
    the contract allows; the entry's fork, said to have stopped at an interrupt instead, gives
    a script that checks the outcome and exits 0."""
    from refmodel import Observation

    found = [p for p in sorted(CORPUS.glob("memory-graph-*/ForkIgnore-*.json"))
             if any(op.name == "tamper" and op.how == "corrupt" for op in load_trace(p).operations)]
    assert found, "no memory-saver ForkIgnore entry through a corrupted checkpoint left"
    trace = load_trace(found[0])
    step = trace.finding.step
    wrong = Observation("interrupted", (), trace.observations[step].state)
    trace = trace.with_(observations=(*trace.observations[:step], wrong))
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=1)
    assert repro.checked and repro.reproduces == Rate(0, 1), repro.outputs
    assert "corrupt_in_memory(" in repro.script
    assert "no defect" in repro.outputs[0]
    check_standalone(repro.script, HARNESS, as_words=True)


def _checked_script_of_invalid_persist(adapter, variant, wf, ops):
    """``ops`` judged on the target (an InvalidPersist ✗), then its script, checked once."""
    from fuzz.minimize import session_judge
    from fuzz.runner import Session, Settings
    from fuzz.trace import Trace

    session = Session(adapter, variant, settings=Settings())
    try:
        judged = session_judge(session)(Trace(wf, ops, target="langgraph", variant=variant.name))
    finally:
        session.close()
    assert judged is not None and judged.key == ("InvalidPersist", "CV", "✗"), judged
    repro = reprocheck.reproduce(adapter, variant, judged.trace, runs=1)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    return repro


# Prints which gates the newest checkpoint's interrupt writes ask for, as the saver returns them
# (the functional API keeps two writes of one interrupt: the task's and the entrypoint's).
_INTERRUPT_GATES = (
    "\nsaved = graph.checkpointer.get_tuple({'configurable': {'thread_id': 'run-1'}})"
    "\nprint(sorted({i.value['gate'] for _, channel, v in saved.pending_writes"
    " if channel == '__interrupt__' for i in v}))\n")


def _printed_around_tamper(script: str, tamper_step: int, read: str, tmp_path) -> list:
    """What ``read`` (script lines) prints last when run after ``script``'s steps before its
    tamper (step ``tamper_step``, 1-based) and after them with the tamper: the store as
    LangGraph reads it, before and after."""
    import subprocess
    import sys

    printed = []
    for upto in (tamper_step - 1, tamper_step):
        (tmp_path / "cut.py").write_text(script.split(f"\n# {upto + 1}. ", 1)[0] + read)
        out = subprocess.run([sys.executable, "cut.py"], cwd=tmp_path, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        printed.append(out.stdout.strip().splitlines()[-1])
    return printed


@pytest.mark.parametrize("name", ["sqlite-graph-sync-head-update", "memory-func-sync-head-update",
                                  "postgres-func-sync-head-update"])
@pytest.mark.parametrize("kind", ["delete", "add"])
def test_repro_of_a_forged_pending_record_writes_it_as_the_harness_did(adapter, variant, name,
                                                                      kind, tmp_path):
    """A forgery of the pending-gate record alone (``Tamper.part="pending"``) gets a
    checked script (it used to fall back to the whole driver: 1,881 lines, unchecked): the
    interrupt write of the asked gate deleted, or one added for a gate not asked.  The test
    also runs the script up to its tamper and reads the writes back, so a script whose forgery
    wrote nothing (and whose check would still see LangGraph run on) fails here."""
    import ast

    from adapters.protocol import CrashAt
    from refmodel import Recover, Resume, Start, Tamper, Workflow

    wf = Workflow(3, frozenset({1, 3}), ("a", "b"))
    pending = Tamper("t0", how="forged", part="pending")
    if kind == "delete":  # gate 1 asked; its record deleted
        ops, step, gate = (Start("t0"), pending, Resume("t0", value="a")), 1, 1
    else:  # task 2 committed, gate 3 not asked yet (the run died as task 3 began): one added
        ops, step, gate = (Start("t0"), Resume("t0", value="a", crash=CrashAt(
            3, "before_effect")), pending, Recover("t0")), 2, 3
    repro = _checked_script_of_invalid_persist(adapter, variant(name), wf, ops)
    assert f"{kind}_interrupt" in repro.script, repro.script
    assert "in the record of which interrupt waits for an answer alone" in repro.script
    check_standalone(repro.script, HARNESS, as_words=True)
    asked = _printed_around_tamper(repro.script, step + 1, _INTERRUPT_GATES, tmp_path)
    # (an answered gate's writes stay in the functional API's checkpoint: only this gate counts)
    before, after = (gate in ast.literal_eval(line) for line in asked)
    assert (before, after) == ((True, False) if kind == "delete" else (False, True)), asked



def _truncation_or_drop(name):
    from refmodel import Recover, Resume, Start, Tamper, Workflow

    if name.endswith("trunczero"):  # the file cut to nothing; a resume starts a new run
        return (Workflow(2, frozenset({1}), ("a", "b")),
                (Start("t0"), Tamper("t0", how="corrupt"), Resume("t0", value="b")),
                "truncate(half=False)")
    # the newest checkpoint of a finished run dropped; recovery finishes from its parent
    return (Workflow(1, frozenset(), ("a", "b")),
            (Start("t0"), Tamper("t0", how="forged"), Recover("t0")), "drop(")


@pytest.mark.parametrize("name", ["sqlite-graph-sync-head-update-trunczero",
                                  "sqlite-graph-sync-head-update-drophead"])
def test_repro_of_a_truncation_or_a_drop_writes_it_as_the_harness_did(adapter, variant, name,
                                                                      tmp_path):
    """The ``trunc*`` variants' truncation and the ``drophead`` variant's forgery get a
    checked script (they fell back to the whole driver: 1,918 lines, unchecked).  The script is
    also run up to its tamper and the store read back, so a ``truncate`` or ``drop`` that
    changed nothing (and whose check might still pass) fails here."""

    wf, ops, shows = _truncation_or_drop(name)
    repro = _checked_script_of_invalid_persist(adapter, variant(name), wf, ops)
    assert shows in repro.script, repro.script
    check_standalone(repro.script, HARNESS, as_words=True)
    counted = _printed_around_tamper(repro.script, 2, (  # run-1's checkpoints
        "\nprint(len(list(graph.get_state_history({'configurable': {'thread_id': "
        "'run-1'}}))))\n"), tmp_path)
    before, after = map(int, counted)
    # Cut to nothing, the new connection finds an empty database; a drop takes one away.
    assert before > 0 and after == (0 if name.endswith("trunczero") else before - 1), counted


_READ_BACK = """
try:
    _c = {'configurable': {'thread_id': 'run-1'}}
    _s, _t = graph.get_state(_c), graph.checkpointer.get_tuple(_c)
    print(repr((len(list(graph.get_state_history(_c))), _s.values, [i.value for i in _s.interrupts],
                sorted(repr(v) for _, ch, v in _t.pending_writes if ch == "__return__"))))
except Exception as exc:  # a checkpoint that no longer decodes
    print(repr(("unreadable", type(exc).__name__)))
"""


@pytest.mark.parametrize("name, part, unfinished", [
    ("postgres-func-sync-head-update", "done", False),  # a finished run: its __end__ channel
    ("postgres-func-sync-head-update", None, True),  # an unfinished one: its @task results
    ("postgres-graph-sync-head-update", None, False),
    ("postgres-graph-sync-head-update-drophead", None, False)])
def test_repro_of_a_postgres_tamper_edits_its_tables_as_the_harness_did(adapter, variant, name,
                                                                        part, unfinished,
                                                                        tmp_path):
    """A tamper of a PostgreSQL store gets a checked script (``*_in_postgres``: the same
    edits on its tables; it fell back to the whole driver, 1,918 lines, unchecked).  The script
    also runs up to the tamper and reads the thread back through LangGraph, before and after:
    a forgery that wrote nothing would still "reproduce" (LangGraph runs on either way), and
    fails here."""

    from refmodel import Recover, Resume, Start, Tamper, Workflow

    wf = Workflow(2, frozenset({2}), ("a", "b")) if unfinished else \
        Workflow(1, frozenset(), ("a", "b"))
    ops = (Start("t0"), Tamper("t0", how="forged", part=part),
           Resume("t0", value="a") if unfinished else Recover("t0"))
    repro = _checked_script_of_invalid_persist(adapter, variant(name), wf, ops)
    assert ("forge_results_in_postgres(" in repro.script) == unfinished
    assert "_in_postgres(" in repro.script, repro.script
    check_standalone(repro.script, HARNESS, as_words=True)
    seen = _printed_around_tamper(repro.script, 2, _READ_BACK, tmp_path)
    assert seen[0] != seen[1], seen


def test_repro_of_a_corrupted_postgres_checkpoint_sees_langgraph_refuse(adapter, variant):
    """LangGraph refuses a PostgreSQL checkpoint whose blobs ``corrupt`` overwrote (allowed).
    Said to have run on instead, the trace gives a script that checks the outcome and exits 0:
    ``corrupt_in_postgres`` damaged what LangGraph reads (a no-op would let it run on, and the
    script would report the defect)."""
    from fuzz.judge import judge_trace
    from fuzz.runner import Session, Settings
    from fuzz.trace import Finding, Trace
    from refmodel import Observation, Recover, Start, Tamper, Workflow

    name, wf = "postgres-graph-sync-head-update", Workflow(1, frozenset(), ("a", "b"))
    ops = (Start("t0"), Tamper("t0", how="corrupt"), Recover("t0"))
    session = Session(adapter, variant(name), settings=Settings())
    try:
        verdict = judge_trace(session.case, wf, ops, adapter.capabilities(variant(name)),
                              list(adapter.deviations(variant(name))))
    finally:
        session.close()
    assert verdict.verdict is None and verdict.observations[2].outcome == "rejected", verdict
    ran_on = Observation("completed", (), None)
    trace = Trace(wf, ops, target="langgraph", variant=name,
                  observations=(*verdict.observations[:2], ran_on),
                  expected=tuple(allowed[0] for allowed in verdict.expected),
                  finding=Finding("InvalidPersist", "CV", 2, "said to have run on"))
    repro = reprocheck.reproduce(adapter, variant(name), trace, runs=1)
    assert repro.checked and repro.reproduces == Rate(0, 1), repro.outputs
    assert "corrupt_in_postgres(" in repro.script and "no defect" in repro.outputs[0]
    check_standalone(repro.script, HARNESS, as_words=True)
