"""Reproduction scripts for findings: record the adapter's calls, compose, verify by running.

``reproduce(adapter, variant, trace, runs=3)`` replays the shrunk trace on the target once more
(again, up to ``RECORD_ATTEMPTS`` times, until the finding's step diverges as recorded: a
timing-dependent trace may run another way), collecting the framework calls the adapter records
(``adapters.calls.record_call``) per operation, asks the adapter for its script
(``Adapter.reproduction``), then runs the script
``runs`` times in a fresh interpreter (this one's ``sys.executable``, without our ``PYTHONPATH``,
so an import of resumefuzz would fail) and counts how often it exits 1: the defect showed.  The
count goes into the corpus entry and the report.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from adapters.protocol import Evidence
from adapters.calls import read_calls
from refmodel import InvalidOperation, Race, World

from . import report
from .errors import EngineError
from .judge import judge_step, model_for
from .rate import Rate
from .report import COULD_NOT_RUN, Reproduction
from .runner import Session, Settings

SCRIPT_TIMEOUT = 120.0  # seconds one run of a script may take
SHOWS = "DEFECT SHOWS"  # what a script's verdict() prints when it exits 1 for the defect
NO_DEFECT = "no defect"  # what it prints when it exits 0


def allowed_steps(trace, caps=None, deviations=()) -> list:
    """Per operation up to the finding's step, every observation the contract allows, judged
    by the campaign's own comparison step (``judge.judge_step``: the adapter's tamper reach
    ``caps``, its documented ``deviations``) on the observations the entry recorded, following
    the branch the target took."""
    model, world, history, out = model_for(trace.workflow, caps), World(), [], []
    last = trace.finding.step if trace.finding is not None else len(trace.operations) - 1
    for i, op in enumerate(trace.operations[: last + 1]):
        if i >= len(trace.observations):
            break
        try:
            judgement = judge_step(model, world, op, trace.observations[i], caps, deviations,
                                   history)
        except InvalidOperation:  # an op the model does not admit here: nothing more is known
            break
        out.append(judgement.allowed)
        history.append((op, trace.observations[i], judgement.allowed))
        world = judgement.world
    return out


def allowed_at(trace, caps=None, deviations=()) -> tuple:
    """Every observation the contract allows at the finding's step."""
    steps = allowed_steps(trace, caps, deviations)
    return steps[trace.finding.step] if len(steps) > trace.finding.step else ()


RECORD_ATTEMPTS = 5  # recordings of a timing-dependent trace, until one diverges as recorded


def record(adapter, variant, trace, op_timeout: float = 30.0) -> tuple:
    """Replay the trace up to its finding's step; per operation, the calls the adapter logged.

    The script repeats the calls of one recording, so that recording must show the divergence:
    an unforced race, or a SIGKILL racing a background writer, may run another way this time
    (two racers one after the other, say), and a script of that way shows nothing.  Up to
    ``RECORD_ATTEMPTS`` recordings are made, until the finding's step is observed as the trace
    recorded it (outcome, effects and state).  Failing that, a finding step that is an unforced
    race is recorded once more as a forced one, where the variant can hold its racers' reads
    (``Capabilities.forced_race``): the interleaving in which all read before any writes, the
    one the script writes out anyway, whose calls a racer that ran second would not make (a
    racer that loads a completed run may not run it; CI's load made five recordings in a row
    run that way).  Failing that too, the last recording is used, and the script's measured
    rate says what it shows."""
    session = Session(adapter, variant, settings=Settings(op_timeout=op_timeout))
    try:
        for _ in range(RECORD_ATTEMPTS):
            calls, last = _record_once(session, trace)
            if _as_recorded(last, trace):
                return calls
        forced = _forced_finding(trace) if adapter.capabilities(variant).forced_race else None
        if forced is not None:
            forced_calls, last = _record_once(session, forced)
            if _as_recorded(last, trace):
                return forced_calls
    finally:
        session.close()  # its temp folder goes with it
    return calls


def _forced_finding(trace):
    """``trace`` with its finding step's race forced, or ``None`` where that step is no
    unforced race.  Only that step: an earlier free race ran as it ran."""
    op = trace.operations[trace.finding.step]
    if not isinstance(op, Race) or op.forced:
        return None
    ops = list(trace.operations)
    ops[trace.finding.step] = replace(op, forced=True)
    return trace.with_(operations=tuple(ops))


def _record_once(session, trace) -> tuple:
    runner = session.case(trace.workflow)
    out, seen, observed = [], 0, None
    try:
        for op in trace.operations[: trace.finding.step + 1]:
            try:
                observed = runner.apply(op)
            except EngineError:
                observed = None  # a tool error here only costs the calls of this op
            calls = read_calls(runner.workdir)
            out.append(tuple(calls[seen:]))
            seen = len(calls)
    finally:
        runner.close()
    return tuple(out), observed


def _as_recorded(observed, trace) -> bool:
    """Is ``observed`` the finding step's recorded observation?  Its error text is not
    compared: it may name a case's temp folder or a process id."""
    step = trace.finding.step
    recorded = trace.observations[step] if step < len(trace.observations) else None
    return (observed is not None and recorded is not None
            and (observed.outcome, observed.effects, observed.state)
            == (recorded.outcome, recorded.effects, recorded.state))


def evidence(trace, calls: tuple, caps=None, deviations=()) -> Evidence:
    f = trace.finding
    return Evidence(ops=tuple(trace.operations), calls=calls, observed=tuple(trace.observations),
                    step=f.step, allowed=allowed_at(trace, caps, deviations),
                    versions=dict(trace.versions), category=f.category, detail=f.detail)


# The most fresh runs a timing-dependent finding's script makes of its scenario (``repeated``):
# LangGraph's SIGKILL loss came back in 10-13 % of the fuzzer's replays and shows in roughly
# 3-8 % of its scripts' runs; up to 30 runs showed it in 20 of 30, 14 of 20 and 16 of 20 runs of
# its three scripts (0, 1 and 3 of 10 running once).  Each run imports the framework again (1-3 s).
REPEAT_CAP = 30
ONE_RUN = "REPRO_ONE_RUN"  # set in the environment of each of those runs


def attempts_for(trace) -> int:
    """How many runs of its scenario the script of ``trace``'s finding makes: 1, or for a
    finding that came back in k of n replays (0 < k < n), enough to show it with 99 %
    probability at that rate (``Rate.trials``), at most ``REPEAT_CAP``."""
    rate = trace.finding.reproduced if trace.finding is not None else None
    if rate is None or not rate.partial:
        return 1
    return min(REPEAT_CAP, rate.trials())


def repeated(script: str, attempts: int, rate: str) -> str:
    """``script`` that runs itself again, up to ``attempts`` times, each in a fresh interpreter,
    and exits with the first run's code that is not 0: 1 at the first run in which the defect
    showed.  A timing-dependent defect (a SIGKILL that races a background write) shows in some
    runs only; a script that checks it once would leave a maintainer with a 0 as often as not
    (LangGraph's ``StateMismatch-6c1194ba511a``: 0 of 10 runs).  Inserted after the script's
    docstring; every script is a file run by ``python`` (``__file__``)."""
    if attempts <= 1:
        return script
    lines = script.splitlines()
    body = ast.parse(script).body
    docstring = (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                 and isinstance(body[0].value.value, str))
    at = body[0].end_lineno if docstring else 0
    # Six lines, kept short: they come before the scenario a maintainer reads first.
    again = f'[sys.executable, __file__], env={{**os.environ, "{ONE_RUN}": "1"}}'
    preamble = [
        f"# The defect depends on timing (it showed in {rate} of the fuzzer's replays): "
        "the script runs",
        f"# its scenario up to {attempts} times, each in a fresh interpreter, and exits 1 "
        "at the first that shows it.",
        "import os, subprocess, sys",
        f'if not os.environ.get("{ONE_RUN}"):',
        f"    runs = (subprocess.call({again}) for _ in range({attempts}))",
        "    sys.exit(next((code for code in runs if code != 0), 0))",
    ]
    return "\n".join(lines[:at] + preamble + lines[at:]) + "\n"


def script_for(adapter, variant, trace, calls: tuple | None = None) -> Reproduction:
    """The adapter's checked script when it can write one (run ``attempts_for(trace)`` times
    over, ``repeated``); no script otherwise, with what the generator raised if it did."""
    error = ""
    if trace.finding is not None and calls is not None:
        proof = evidence(trace, calls, adapter.capabilities(variant), adapter.deviations(variant))
        try:
            script = adapter.reproduction(variant, trace.workflow, proof)
        except Exception as exc:  # noqa: BLE001 - a bug of the generator must not lose the finding
            script, error = None, f"{type(exc).__name__}: {exc}"
        if script:
            attempts = attempts_for(trace)
            return Reproduction(script=repeated(script, attempts, trace.finding.rate),
                                attempts=attempts)
    return Reproduction(script=None, error=error)


def verify(script: str, runs: int, timeout: float = SCRIPT_TIMEOUT) -> tuple:
    """Run ``script`` ``runs`` times in a fresh interpreter: ``(times it exited 1, last lines)``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    k, outputs = 0, []
    with tempfile.TemporaryDirectory(prefix="resumefuzz-repro-") as tmp:
        path = Path(tmp) / "repro.py"
        path.write_text(script)
        for _ in range(runs):
            try:
                done = subprocess.run([sys.executable, str(path)], cwd=tmp, env=env,
                                      capture_output=True, text=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                outputs.append(f"did not finish within {timeout:.0f} s")
                continue
            # An uncaught traceback exits 1 too: only the check's own verdict counts.
            k += done.returncode == 1 and SHOWS in done.stdout
            if done.returncode != 0 and SHOWS not in done.stdout and NO_DEFECT not in done.stdout:
                # Stopped before its verdict: the exception's line (a traceback ends with it).
                error = (done.stderr.strip().splitlines() or ["no output"])[-1]
                outputs.append(f"exit {done.returncode}: {COULD_NOT_RUN}{error}")
                continue
            tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
            outputs.append(f"exit {done.returncode}: " + " / ".join(tail))
    return k, tuple(outputs)


def reproduce(adapter, variant, trace, runs: int = 3, op_timeout: float = 30.0) -> Reproduction:
    """Record, compose and (for a checked script, ``runs`` > 0) verify."""
    calls = record(adapter, variant, trace, op_timeout) if trace.finding is not None else None
    repro = script_for(adapter, variant, trace, calls)
    if not (repro.script and runs > 0):
        return repro
    # A run of a repeated script may make up to ``attempts`` runs of its scenario.
    k, outputs = verify(repro.script, runs, SCRIPT_TIMEOUT * repro.attempts)
    return replace(repro, reproduces=Rate(k, runs), outputs=outputs)


VERIFY_RUNS = 3  # fresh runs of each new script after shrinking


def target_path(adapter) -> str:
    """``module:Class`` of the adapter, what ``--target`` takes for a third-party adapter."""
    cls = type(adapter)
    return f"{cls.__module__}:{cls.__qualname__}"


def refresh(adapter, variant, trace, corpus_path: Path, reports_dir: Path, *,
            runs: int = VERIFY_RUNS, op_timeout: float = 30.0, save: bool = True):
    """Generate (and verify ``runs`` times) the finding's script, record the result in the
    corpus entry at ``corpus_path`` (unless ``save`` is false: a finding that never came back
    has no entry) and write its report: ``(trace, report path, repro)``."""
    from .trace import dump_trace

    repro = reproduce(adapter, variant, trace, runs=runs, op_timeout=op_timeout)
    script = None
    if repro.script:
        script = {"checked": True, "lines": repro.lines}
        if repro.reproduces is not None:
            script.update(runs=repro.reproduces.n, reproduced=repro.reproduces.k)
    trace = trace.with_(finding=replace(trace.finding, script=script))
    if save:
        dump_trace(trace, corpus_path)
    allowed = allowed_steps(trace, adapter.capabilities(variant), adapter.deviations(variant))
    path = report.write(trace, corpus_path, repro, reports_dir, allowed=allowed,
                        target_path=target_path(adapter))
    return trace, path, repro
