"""The reproduction layer (adapters/reproduction), on a tiny workflow written in plain Python (no framework):
the composed script is standalone, short, free of our vocabulary, and its exit status says
whether the defect showed (1) or not (0), with an exception and with a SIGKILL in a child."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from adapters.protocol import Evidence, Fork, Recover, Start, StateView, Workflow
from refmodel import Observation
from adapters.reproduction.script import (
    Check,
    Script,
    Step,
    check_for,
    crash_spot,
    op_words,
    snippet,
    source_as,
    thread_label,
    without_docstring,
)

# A "framework" of a few lines: run(thread) runs tasks 1..N once each, remembering in a dict
# which ran; a forgetful variant forgets, so a second run fires task 1's effect again.
WORKFLOW = textwrap.dedent('''
    N, DONE, FORGETFUL = 2, dict(), FORGETFUL_VALUE
    def run(thread):
        for t in range(1, N + 1):
            if t in DONE.setdefault(thread, set()):
                continue
            crash_point(t, "before its effect") if "crash_point" in globals() else None
            effect(t, None)
            crash_point(t, "after its effect") if "crash_point" in globals() else None
            if not FORGETFUL:
                DONE[thread].add(t)
        return "completed"
    def outcome(result):
        return result
''')
HARNESS_WORDS = ("t0", "f1", "tip", "after_commit", "before_effect", "in_flight", "resumefuzz")


def compose(forgetful: bool, *, crash=None, aspect="effects") -> str:
    workflow = WORKFLOW.replace("FORGETFUL_VALUE", str(forgetful))
    allowed = ((),) if aspect == "effects" else ("completed",)
    return Script(
        header="Task 1 must not run twice.",
        imports=(),
        workflow_src=workflow,
        steps=(Step(comment="First run", calls=("run('run-1')",)),
               Step(comment="Run again", calls=("run('run-1')",), crash=crash, observed=True)),
        check=Check(aspect=aspect, allowed=allowed, expected="no task runs",
                    observed="task 1 runs again"),
    ).source()


def run(source: str, tmp_path) -> subprocess.CompletedProcess:
    path = tmp_path / "repro.py"
    path.write_text(source)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("forgetful, status", [(True, 1), (False, 0)])
def test_script_exits_1_when_the_defect_shows_and_0_when_not(tmp_path, forgetful, status):
    source = compose(forgetful)
    proc = run(source, tmp_path)
    assert proc.returncode == status, proc.stdout + proc.stderr
    assert ("DEFECT SHOWS" in proc.stdout) == (status == 1)
    assert len(source.splitlines()) <= 60
    for word in ("import adapters", "import refmodel", "import fuzz", "from adapters",
                 "from refmodel", "from fuzz"):
        assert word not in source
    body = source.split('"""', 2)[2]
    for word in HARNESS_WORDS:
        assert f"'{word}'" not in body and f'"{word}"' not in body


def test_an_exception_crash_point_is_observed_as_crashed(tmp_path):
    source = compose(False, crash=(1, "before_effect", "exception"), aspect="outcome")
    # Every crash point raises at a task's own moment: the three-line crash_point, set by
    # the step itself, and no observe_crashing.
    # A step of one expression is a lambda, with no function to name.
    assert ("CRASH = (1, 'before its effect')\nstatus, fired = observe(lambda: outcome(run('run-1')))"
            "\nCRASH = None") in source
    assert "observe_crashing" not in source and "os.kill" not in source
    proc = run(source, tmp_path)
    # Task 1 already ran in the first call: the crash point is never reached, the run completes.
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_sigkill_runs_in_a_child_that_kills_itself(tmp_path):
    source = compose(True, crash=(1, "in_flight", "sigkill"))
    assert "in_child(step_2" in source and "os.fork()" in source
    assert len(source.splitlines()) <= 120
    proc = run(source, tmp_path)
    assert "the child process was killed" in proc.stdout, proc.stdout + proc.stderr
    # The child fired task 1's effect again (in the SQLite log) before it died.
    assert proc.returncode == 1 and "DEFECT SHOWS" in proc.stdout


def test_an_asynchronous_sigkill_step_runs_its_coroutine_in_the_child(tmp_path):
    # Awaited calls in a plain ``def step_2()`` would be a SyntaxError: the script would exit 1
    # without ever forking, a "reproduction" that shows nothing.
    workflow = (WORKFLOW.replace("FORGETFUL_VALUE", "True")
                + "async def arun(thread):\n    return run(thread)\n")
    source = Script(
        header="Task 1 must not run twice.", imports=(), workflow_src=workflow,
        steps=(Step(comment="First run", calls=("await arun('run-1')",)),
               Step(comment="Run again", calls=("await arun('run-1')",),
                    crash=(1, "in_flight", "sigkill"), observed=True)),
        check=Check(aspect="effects", allowed=((),), expected="no task runs",
                    observed="task 1 runs again"),
        asynchronous=True,
    ).source()
    assert "async def calls_2():\n    await arun('run-1')\ndef step_2():\n    return asyncio.run(calls_2())" in source
    proc = run(source, tmp_path)
    assert "the child process was killed" in proc.stdout, proc.stdout + proc.stderr
    assert proc.returncode == 1 and "DEFECT SHOWS" in proc.stdout


def test_a_traceback_is_not_a_verdict(tmp_path):
    # Exit 1 is the verdict's alone ("the defect shows"): a script stopped by an exception
    # before it exits 2 (it exited 1 before 2026-12-07, as Python does).
    source = compose(True).replace("run('run-1')\n# 2.", "run('run-1')\nraise SystemError\n# 2.")
    proc = run(source, tmp_path)
    assert proc.returncode == 2 and "DEFECT SHOWS" not in proc.stdout
    assert "SystemError" in proc.stderr  # its traceback, for whoever runs it


@pytest.mark.parametrize("missing", ["import nosuchframework", "from nosuchstore import Saver"])
def test_a_script_that_cannot_import_exits_2_not_1(tmp_path, missing):
    """A framework or a store module that is not importable (a user's store module, run without
    its ``PYTHONPATH``) is no verdict: before 2026-12-07 the script exited 1, "the defect
    shows", and the check said the script "misses something the harness does"."""
    source = Script(
        header="h", imports=(missing,), workflow_src=WORKFLOW.replace("FORGETFUL_VALUE", "True"),
        steps=(Step(comment="Run", calls=("run('run-1')",), observed=True),),
        check=Check(aspect="effects", allowed=((),), expected="e", observed="o")).source()
    proc = run(source, tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "ModuleNotFoundError: No module named 'nos" in proc.stderr.strip().splitlines()[-1]
    # observe() re-raises a NameError (a mistake in the script): exit 2 as well.
    broken = compose(True, crash=(1, "in_flight", "exception")).replace(
        "run('run-1')\n# 2.", "run('run-1')\nobserve(lambda: undefined_name)\n# 2.")
    proc = run(broken, tmp_path)
    assert proc.returncode == 2 and "NameError" in proc.stderr, proc.stdout + proc.stderr


def _scripts_in(tmp_path):
    """A script's run with its own ``TMPDIR``, and the folders left in it afterwards."""
    temp = tmp_path / "temp"
    temp.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def run_in(source: str):
        path = tmp_path / "repro.py"
        path.write_text(source)
        proc = subprocess.run([sys.executable, str(path)], cwd=tmp_path, capture_output=True,
                              text=True, timeout=60, env={**env, "TMPDIR": str(temp)})
        return proc, sorted(p.name for p in temp.iterdir())
    return run_in


@pytest.mark.parametrize("how", ["exit 1", "exit 0", "exception", "race", "a run's subfolder"])
def test_a_script_removes_its_temporary_folder_as_it_exits(tmp_path, how):
    """Every run of a script left its ``repro-*`` folder behind before 2026-12-07 (one CI run
    left about 950): the folder goes when the script exits, whatever the exit; each of these
    scripts forks a child (a SIGKILL, racers) that must not take it first."""
    run_in = _scripts_in(tmp_path)
    sigkill = (1, "in_flight", "sigkill")
    source = {"exit 1": compose(True, crash=sigkill), "exit 0": compose(False, crash=sigkill),
              "exception": compose(True, crash=sigkill).replace(
                  "\n# 2.", "\nraise SystemError\n# 2.", 1),
              "race": _raced(),
              # pydantic-graph's scripts point WORKDIR at each run's own folder (use_run_dir):
              # removing the last one left the script's folder and the other runs behind.
              "a run's subfolder": compose(True, crash=sigkill).replace(
                  "\n# 2.", "\nWORKDIR = os.path.join(WORKDIR, 'run-1')\n"
                  "os.makedirs(WORKDIR)\n# 2.", 1)}[how]
    assert "WORKDIR = tempfile.mkdtemp(" in source
    proc, left = run_in(source)
    assert proc.returncode == {"exit 0": 0, "exception": 2}.get(how, 1), proc.stdout + proc.stderr
    assert left == [], left


def _raced() -> str:
    workflow = WORKFLOW.replace("FORGETFUL_VALUE", "True")
    return Script(header="h", imports=(), workflow_src=workflow,
                  steps=(Step(comment="Race", racers=(("run('run-1')",), ("run('run-1')",)),
                              observed=True),),
                  check=Check(aspect="effects", allowed=((),), expected="e", observed="o")).source()


def test_a_forked_child_that_exits_leaves_its_parents_folder(tmp_path):
    """Only the process that made the folder removes it: a child forked by the script (or by
    the framework) that exits normally runs the exit functions it inherited too."""
    run_in = _scripts_in(tmp_path)
    source = "\n".join([
        "import atexit, os, shutil, sys, tempfile", snippet("atexit:last_value"),
        snippet("WORKDIR"), snippet("atexit:WORKDIR"),
        "pid = os.fork()",
        "if pid == 0:",
        "    sys.exit(0)  # the exit functions run in the child",
        "os.waitpid(pid, 0)",
        "print('still there' if os.path.isdir(WORKDIR) else 'gone')"]) + "\n"
    proc, left = run_in(source)
    assert proc.stdout.strip() == "still there" and proc.returncode == 0, proc.stderr
    assert left == []  # and the parent's exit removed it


def test_the_engine_importing_the_runtime_makes_no_folder(tmp_path):
    """Workers import the runtime (through ``script``) and end with
    ``os._exit`` or a SIGKILL, where no exit function runs: until 2026-12-07 each left the
    ``repro-*`` folder the import made (116 by one replay of CrewAI's corpus).  Only a script
    makes its ``WORKDIR``."""
    temp = tmp_path / "temp"
    temp.mkdir()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run(
        [sys.executable, "-c", "import os, adapters.reproduction.script; os._exit(0)"], cwd=tmp_path,
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": root, "TMPDIR": str(temp)})
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in temp.iterdir()) == []


def test_snippets_are_the_runtime_functions_without_docstrings():
    text = snippet("effect")
    assert text.startswith("def effect(task, value):") and '"""' not in text
    assert snippet("local:effect").strip().endswith("EFFECTS.append((task, value))")
    assert snippet("CRASH").startswith("CRASH = None")
    assert without_docstring('class A:\n    """doc."""\n') == "class A:\n    pass"
    with pytest.raises(KeyError):
        snippet("nothing_of_that_name")


def test_crash_spots_name_the_moment_in_words():
    assert crash_spot((1, "after_commit", "sigkill")) == (1, "after it completed", "sigkill")
    assert crash_spot((2, "in_flight", "exception")) == (2, "after its effect", "exception")
    assert crash_spot(None) is None


@pytest.mark.parametrize("task", [1, 2])
def test_a_task_that_dies_after_it_completed_dies_at_the_next_task_or_the_return(tmp_path, task):
    """Task 1 dies as task 2 starts; task 2, the last, once the run returned: either way the
    crash happens after the effect, so the run is 'crashed' with the effect fired."""
    source = compose(True, crash=(task, "after_commit", "exception"), aspect="outcome")
    proc = run(source, tmp_path)
    assert "raised Crash: task %d fails after it completed" % task in proc.stdout, proc.stdout
    assert proc.returncode == 1, proc.stdout + proc.stderr


def test_check_picks_the_simplest_aspect_that_tells_observed_from_allowed():
    wf = Workflow(1, {1}, ("a", "b"))
    done = StateView.of(wf, [1], {1: "a"}, None)
    start = Observation("interrupted", (), StateView.of(wf, [], {}, 1))
    fork = Fork("t0", gate=1, value="a", new_thread="f1")
    ignored = Observation("completed", (), StateView.of(wf, [], {}, None))
    allowed = (Observation("completed", (("f1", 1, "a"),), done),)
    evidence = Evidence(ops=(Start("t0"), fork), calls=((), ()), observed=(start, ignored),
                        step=1, allowed=allowed)
    check = check_for(evidence, state_readable=True)
    assert check.aspect == "effects" and check.allowed == ([(1, "a")],)
    assert check.expected == "task 1 ran with 'a'" and check.observed == "no task ran"
    refused = Observation("rejected", (), done, error="ValueError: no")
    evidence = Evidence(ops=(Start("t0"), Recover("t0")), calls=((), ()),
                        observed=(start, refused), step=1, allowed=allowed)
    check = check_for(evidence, state_readable=False)
    assert check.aspect == "outcome" and "ValueError: no" in check.observed
    assert op_words(fork) == "Fork run-1 at the interrupt of task 1, answering 'a', as branch-1"
    assert thread_label("t0") == "run-1" and thread_label("f2") == "branch-2"


def test_a_state_not_compared_in_an_allowed_refusal_is_no_state_check():
    """After a tamper the contract allows a loud refusal whatever the store then holds (its
    state is not compared): a refusal with no effects is then no defect on its state, while a
    refusal that fired an effect still is one on its effects."""
    wf = Workflow(1, {1}, ("a", "b"))
    start = Observation("interrupted", (), StateView.of(wf, [], {}, 1))
    done = StateView.of(wf, [1], {1: "a"}, None)
    allowed = (Observation("completed", (("f1", 1, "a"),), done), Observation("rejected", (), None))
    fork = Fork("t0", gate=1, value="a", new_thread="f1")
    refused = Observation("rejected", (), StateView.of(wf, [], {}, None), error="ValueError: bad")
    evidence = Evidence(ops=(Start("t0"), fork), calls=((), ()), observed=(start, refused),
                        step=1, allowed=allowed)
    assert check_for(evidence, state_readable=True) is None
    fired = Observation("rejected", (("f1", 1, "b"),), StateView.of(wf, [], {}, None))
    evidence = Evidence(ops=(Start("t0"), fork), calls=((), ()), observed=(start, fired),
                        step=1, allowed=allowed)
    assert check_for(evidence, state_readable=True).aspect == "effects"


def test_a_sigkill_step_that_never_reaches_its_crash_point_reports_what_the_child_saw(tmp_path):
    """The child's outcome comes back from it: 'crashed' only when it was killed."""
    source = compose(False, crash=(1, "in_flight", "sigkill"), aspect="outcome")
    assert "status = in_child(step_2" in source
    proc = run(source, tmp_path)
    # Task 1 already ran in the first call: the child never dies and the run completes.
    assert "the child process exited" in proc.stdout, proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_each_step_may_run_in_a_fresh_context(tmp_path):
    workflow = WORKFLOW.replace("FORGETFUL_VALUE", "False")
    source = Script(
        header="Each call in its own context.", imports=(), stdlib=("contextvars",),
        workflow_src=workflow + "VAR = contextvars.ContextVar('var', default=0)",
        steps=(Step(comment="First run", calls=("VAR.set(1)", "run('run-1')")),
               Step(comment="Run again", calls=("assert VAR.get() == 0", "run('run-1')"),
                    observed=True)),
        check=Check(aspect="effects", allowed=((),), expected="no task runs", observed="-"),
        fresh_context=True,
    ).source()
    assert "contextvars.copy_context().run(step_1)" in source
    proc = run(source, tmp_path)
    assert proc.returncode == 0 and "no defect" in proc.stdout, proc.stdout + proc.stderr


def _save_json(thread, state):
    """One of several stores."""
    return (thread, state)


async def _build_loop_team():
    return None


def test_source_as_defines_the_function_under_the_name_the_calls_use():
    assert source_as(_save_json, "save").splitlines() == [
        "def save(thread, state):", "    return (thread, state)"]
    assert source_as(_build_loop_team, "build_team").startswith("async def build_team():")


def test_runtime_snippets_leave_our_comment_lines_out():
    # observe's comments explain the runtime to us; the script's reader has the names.
    assert not any(line.lstrip().startswith("#") for line in snippet("observe").splitlines())
    assert snippet("local:effects") == "effects = EFFECTS.copy"


# A workflow whose task has a plain crash point at each moment (the adapters' spelling).
PLAIN_POINTS = textwrap.dedent('''
    def run(thread):
        for t in (1, 2):
            crash_point(t, "before its effect")
            effect(t, None)
            crash_point(t, "after its effect")
        return "completed"
    def outcome(result):
        return result
''')


def _plain_script(crash, *, asynchronous=False, calls=("run('run-1')",), workflow=PLAIN_POINTS):
    return Script(
        header="Each task fires once.", imports=(), workflow_src=workflow,
        steps=(Step(comment="Prepare", calls=calls),
               Step(comment="Run", calls=("run('run-1')",), crash=crash, observed=True)),
        check=Check(aspect="effects", allowed=([[1, None], [2, None]],), expected="each once",
                    observed="other"),
        asynchronous=asynchronous,
    ).source()


def test_the_workflow_is_pasted_as_written_with_every_crash_point(tmp_path):
    # The definition is the adapter's own, unedited: every crash point stays, and a script
    # whose steps crash nowhere still defines crash_point (CRASH stays None).
    none = _plain_script(None)
    assert PLAIN_POINTS.strip() in none and "CRASH = None" in none
    before = _plain_script((1, "before_effect", "exception"))
    # A task that dies "after it completed" dies at the next task's "before its effect" point.
    after = _plain_script((1, "after_commit", "exception"))
    assert PLAIN_POINTS.strip() in before and PLAIN_POINTS.strip() in after
    # Each still runs to its verdict: both tasks fire again (allowed), or the crash stops them.
    for source, status, verdict in ((none, 0, "no defect"), (before, 1, "DEFECT SHOWS"),
                                    (after, 1, "DEFECT SHOWS")):
        proc = run(source, tmp_path)
        assert proc.returncode == status and verdict in proc.stdout, proc.stdout + proc.stderr


def test_an_asynchronous_step_that_awaits_nothing_is_straight_lines(tmp_path):
    source = _plain_script(None, asynchronous=True, calls=("x = 1", "run('run-1')"))
    assert "# 1. Prepare\nx = 1\nrun('run-1')\n" in source and "step_1" not in source
    # A name the workflow defines is never rebound at the top of the script: wrapped.
    shadowing = _plain_script(None, asynchronous=True, calls=("outcome = 1", "run('run-1')"))
    assert "async def step_1():\n    outcome = 1" in shadowing
    assert run(source, tmp_path).returncode == 0


def test_an_asynchronous_step_of_one_expression_keeps_its_coroutine():
    # Out of its coroutine, the expression's other calls would run with no event loop.
    source = Script(
        header="h", imports=(), workflow_src="async def go():\n    return 'completed'\n"
        "def outcome(r):\n    return r",
        steps=(Step(comment="Go", calls=("await go()",), observed=True),),
        check=Check(aspect="outcome", allowed=("completed",), expected="e", observed="o"),
        asynchronous=True,
    ).source()
    assert ("async def step_1():\n    return outcome(await go())\n"
            "status, fired = observe(lambda: asyncio.run(step_1()))") in source


def test_a_joint_check_when_each_aspect_alone_matches_some_allowed_observation(tmp_path):
    """AutoGen's crash after a task completed: the observed run crashed having fired task 1
    (like one allowed observation) but stored nothing (like the two others): no single aspect
    tells it apart; the three together do, and only where the adapter asks for it."""
    wf = Workflow(1, {1}, ("a", "b"))
    asked = StateView.of(wf, [], {}, 1)
    start = Observation("interrupted", (), asked)
    allowed = (Observation("rejected", (), asked), Observation("interrupted", (), asked),
               Observation("crashed", (("t0", 1, "a"),), StateView.of(wf, [1], {1: "a"}, None)))
    observed = Observation("crashed", (("t0", 1, "a"),), asked)
    evidence = Evidence(ops=(Start("t0"), Recover("t0")), calls=((), ()),
                        observed=(start, observed), step=1, allowed=allowed)
    assert check_for(evidence, state_readable=True) is None
    check = check_for(evidence, state_readable=True, joint=True)
    assert check.aspect == "joint" and check.reads_outcome and check.reads_state
    assert check.observed == ("the call dies at the crash point, task 1 ran with 'a'; tasks done: "
                              "none; the interrupt of task 1 pending")
    # An allowed observation whose state is not compared allows any state: no joint check.
    loose = Evidence(ops=evidence.ops, calls=evidence.calls, observed=evidence.observed, step=1,
                     allowed=(*allowed[:2], Observation("crashed", (("t0", 1, "a"),), None)))
    assert check_for(loose, state_readable=True, joint=True) is None
    # The script compares the three at once: the observed triple is a defect, an allowed one not.
    for state, status in (("{'done': [], 'answers': {}, 'pending': 1}", 1),
                          ("{'done': [1], 'answers': {'1': 'a'}, 'pending': None}", 0)):
        source = Script(
            header="h", imports=(),
            workflow_src="def go():\n    effect(1, 'a')\n    crash_point(1, \"after its effect\")\n"
                         "def outcome(r):\n    return r",
            steps=(Step(comment="Go", calls=("go()",), observed=True,
                        crash=(1, "in_flight", "exception")),),
            check=Check(aspect="joint", allowed=check.allowed, expected="e", observed="o",
                        state_src=state),
        ).source()
        # The checked step crashes: the observe that tells "crashed" from "rejected".
        assert "observe(lambda: outcome(go()))" in source and '"crashed" if crashed' in source
        proc = run(source, tmp_path)
        assert proc.returncode == status, proc.stdout + proc.stderr
        assert ("DEFECT SHOWS" if status else "no defect") in proc.stdout  # the verdict, no traceback


def test_a_definition_that_reads_bad_output_gets_it_defined(tmp_path):
    # The task body keeps its out-of-schema branch; a trace in which no task takes it still
    # runs: BAD_OUTPUT is defined, None, before the definition.
    workflow = PLAIN_POINTS.replace("effect(t, None)", 'effect("<bad>" if t == BAD_OUTPUT else t, None)')
    source = _plain_script(None, workflow=workflow)
    assert source.count("BAD_OUTPUT = None") == 1
    assert run(source, tmp_path).returncode == 0
    own = "BAD_OUTPUT = None  # the adapter's own line\n" + workflow
    assert _plain_script(None, workflow=own).count("BAD_OUTPUT = None") == 1
