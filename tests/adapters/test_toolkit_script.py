"""The reproduction-script toolkit, on a tiny workflow written in plain Python (no framework):
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
from adapters.toolkit.script import (
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
    assert "CRASH = (1, 'before its effect')\nstatus, fired = observe(step_2)\nCRASH = None" in source
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


def test_a_traceback_is_not_a_verdict(tmp_path):
    source = compose(True).replace("run('run-1')\n# 2.", "run('run-1')\nraise SystemError\n# 2.")
    proc = run(source, tmp_path)
    assert proc.returncode == 1 and "DEFECT SHOWS" not in proc.stdout


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
