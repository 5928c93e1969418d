"""pydantic-graph reproduction scripts: composed from the calls the case recorded, short, in
pydantic-graph's terms, standalone, and their exit status is the verdict: 1 on a known defect,
0 on a trace pydantic-graph gets right."""

from __future__ import annotations

from pathlib import Path

from fuzz import reprocheck
from fuzz.rate import Rate
from fuzz.testing import allowed_resume_trace, check_standalone
from fuzz.trace import load_trace

CORPUS = Path(__file__).resolve().parents[3] / "corpus" / "pydantic-graph"
# A fixed trace kept beside the test (the corpus copy was re-minimized away): a crash after task
# 1 completed, then a recovery.
STUCK = Path(__file__).resolve().parent / "data" / "Stuck-49bd1e2cc4ce.json"
BAD_OUTPUT = CORPUS / "file-single-resume_docs-recover_ifp" / "InvalidPersist-82f3a3375369.json"
HARNESS = ('Deps', 'hooks')  # and fuzz.testing.HARNESS_WORDS


def test_repro_of_an_output_outside_the_schema_exits_1(adapter, variant):
    """A task writes a string where the state has a task number; the run completes where the
    contract wants a refusal."""
    trace = load_trace(BAD_OUTPUT)
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=1)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    assert repro.lines <= 120, repro.script
    # The single node shape's task body is written inside Task.run (a one-task Task has no
    # number: the script reads none).
    assert 'ctx.state.done.append("<bad>" if BAD_OUTPUT == 1 else 1)' in repro.script
    assert "t: int" not in repro.script and "Task()" in repro.script
    check_standalone(repro.script, HARNESS)


def test_repro_of_a_crash_runs_the_crash_point_inside_the_node(adapter, variant):
    trace = load_trace(STUCK)
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=0)
    assert repro.checked and repro.lines <= 120, repro.script
    assert "observe_crashing(lambda: asyncio.run(step_1()), (1, 'after it completed', " \
           "'exception'))" in repro.script
    assert "graph.iter_from_persistence(p)" in repro.script
    check_standalone(repro.script, HARNESS)


def test_repro_of_what_pydantic_graph_gets_right_exits_0(adapter, variant):
    """Start and resume with 'a', recorded as if the resume had fired nothing: the script sees
    task 1 fire with 'a', which is what the contract allows, so it exits 0."""
    trace = allowed_resume_trace(load_trace(STUCK))
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=1)
    assert repro.checked and repro.reproduces == Rate(0, 1), repro.outputs
    assert repro.lines <= 60, repro.script
    check_standalone(repro.script, HARNESS)


# Kept beside the test (corpus entries move when campaigns re-find them): races whose later racer
# answers the next gate with its value, one on the single node shape, one on the classes shape.
RACE = Path(__file__).resolve().parent / "data" / "DoubleConsume-8ad8933ccc55.json"
RACE_CLASSES = Path(__file__).resolve().parent / "data" / "DoubleConsume-ea601c37ea7e.json"


def test_repro_of_a_race_runs_the_racers_in_processes_the_later_claim_after(adapter, variant):
    """The racers run in processes of their own; the second, shown gate 1 too, claims once the
    first has returned and answers gate 2: deterministic in the script (a barrier, not timing),
    so it reproduces every time."""
    trace = load_trace(RACE)
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=2)
    assert repro.checked and repro.reproduces == Rate(2, 2), repro.outputs
    assert repro.lines <= 120, repro.script
    assert repro.script.count("graph.iter_from_persistence(p) as run:") == 2, repro.script
    assert "race(racer_1, racer_2)" in repro.script, repro.script
    check_standalone(repro.script, HARNESS, as_words=True)  # "multiprocessing" holds "tip"


def test_repro_on_the_classes_shape_defines_one_node_class_per_task(adapter, variant):
    """A race: its racers in processes, the later one's claim held (see below)."""
    trace = load_trace(RACE_CLASSES)
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=1)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    assert "T1 = task_class(1, T2)" in repro.script and "graph = Graph(nodes=[T1, T2]" in repro.script
    assert "race(racer_1, racer_2)" in repro.script, repro.script
    check_standalone(repro.script, HARNESS, as_words=True)  # "multiprocessing" holds "tip"


# A race on one gate (kept beside the test): racer 1 answers it and runs to the end; the
# other's load_next() then finds nothing to run, and the docs' idiom starts a fresh run on the
# same file, whose unanswered gate becomes the run's latest snapshot.
RACE_FRESH = Path(__file__).resolve().parent / "data" / "StateMismatch-2d9b7f1eca6a.json"


def test_repro_of_a_race_runs_the_racers_at_once_the_later_claim_held(adapter, variant):
    """The racers run in processes of their own, released together; the later racer's
    load_next() (a FileStatePersistence subclass's) waits at a barrier, not a sleep, until racer
    1's call has returned: the order the fuzzer's racers showed it in, every time."""
    trace = load_trace(RACE_FRESH)
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=2)
    assert repro.checked and repro.reproduces == Rate(2, 2), repro.outputs
    assert repro.lines <= 120, repro.script
    script = repro.script
    assert "race(racer_1, racer_2)" in script and "HOLD = multiprocessing.Barrier(2)" in script
    assert "class HeldPersistence(FileStatePersistence):" in script
    assert "p = file_persistence('run-1', HeldPersistence)" in script
    assert "return await graph.initialize(T1(), p, state=State())" in script  # the docs' branch
    assert "sleep" not in script
    check_standalone(script, HARNESS, as_words=True)


FORGED = Path(__file__).resolve().parent / "data" / "InvalidPersist-17d0e43f2562.json"


def test_repro_of_a_forged_snapshot_replaces_it_in_pydantic_graphs_classes(adapter, variant):
    """In memory, the tamper is the newest snapshot replaced by one the run never wrote; the
    recovery then runs it without a word."""
    trace = load_trace(FORGED)
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=1)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    assert "p.last_snapshot = NodeSnapshot(state=State(done=[], answers={}), node=Task(), " \
           "id=p.last_snapshot.id)" in repro.script
    check_standalone(repro.script, HARNESS)


# Kept beside the test: soft traces (no SIGKILL, race or twin) whose scripts are specialised to
# stay within issue 14's 60 lines.
CRASHED_IN_MEMORY = Path(__file__).resolve().parent / "data" / "Stuck-5c9ab37ac9f7.json"
CLASSES_OF_ONE = Path(__file__).resolve().parent / "data" / "Stuck-5c12a12f0628.json"
RECOVERED_FILE = Path(__file__).resolve().parent / "data" / "Stuck-a54b4a4f16a1.json"


def test_repro_of_one_run_makes_its_persistence_once_and_writes_the_loop_where_it_runs(
        adapter, variant):
    """One run in memory: one ``SimpleStatePersistence`` made before the steps (no opener in
    each), the docs' loop written in the one step that runs it (no ``drive``), its condition
    without ``GATES`` (no gate), no ``outcome`` (the checked step ends in its block), and no
    answer anywhere (no gate: no ``answer`` field, no ``answers``)."""
    trace = load_trace(CRASHED_IN_MEMORY)
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=1)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    assert repro.lines <= 60, repro.script
    body = repro.script.split('"""', 2)[2]
    assert "p = SimpleStatePersistence()" in body and "memory_persistence" not in body
    assert "MEMORY" not in body and "def drive" not in body and "def outcome" not in body
    assert "        while not isinstance(run.next_node, End):\n            await run.next()" in body
    assert "answer: str" not in body and ".answer" not in body and "answers" not in body
    assert "GATES" not in body
    check_standalone(repro.script, HARNESS)


def test_repro_on_the_classes_shape_of_one_task_writes_its_class_out(adapter, variant):
    """One task on the classes shape: ``T1`` written out (no ``task_class``); one file
    persistence typed by the graph's first call (no ``set_graph_types``); a start that is one
    awaited call run straight; the docs' ``load_next()`` that found nothing left unnamed."""
    trace = load_trace(CLASSES_OF_ONE)
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=1)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    script = repro.script
    assert "class T1(BaseNode[State, None, None]):" in script
    assert "task_class" not in script and "make_dataclass" not in script
    assert "\nasyncio.run(graph.initialize(T1(), p, state=State()))\n" in script
    assert "    await p.load_next()  # None" in script
    assert script.count("snapshot = await p.load_next()") == 1
    assert "set_graph_types" not in script and "file_persistence" not in script
    assert "ctx.state.answers[1] = self.answer" in script  # every task a gate: no value
    check_standalone(script, HARNESS)


def test_repro_leaves_out_a_load_all_whose_snapshot_nothing_reads(adapter, variant):
    """The recovery's ``last = (await p.load_all())[-1]`` (the case's choice of path) is left
    out where a call follows it and nothing reads ``last``: the script's refusal is the
    framework's (``iter_from_persistence``)."""
    trace = load_trace(RECOVERED_FILE)
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=1)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    assert repro.lines <= 60, repro.script
    assert "load_all" not in repro.script
    assert "raised GraphRuntimeError" in repro.outputs[0], repro.outputs
    check_standalone(repro.script, HARNESS)


# Kept beside the test: a resume whose outcome the check reads, read once.
OUTCOME_READ_ONCE = Path(__file__).resolve().parent / "data" / "InvalidPersist-d5a85fb7c547.json"


def test_repro_writes_out_an_outcome_read_once(adapter, variant):
    """A step whose outcome the check reads, the only one: no ``outcome`` function, its
    expression at the call, and the script still exits 1 on the defect."""
    trace = load_trace(OUTCOME_READ_ONCE)
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=1)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    assert "def outcome" not in repro.script and "outcome(" not in repro.script
    assert 'return "completed" if isinstance(run.next_node, End) else "interrupted"' \
        in repro.script
    check_standalone(repro.script, HARNESS)
