"""The worker machinery, on the reference target: barriers, ledger, races, twins, time limits."""

import gc
import os
import re
import signal
import weakref
from pathlib import Path

import pytest

from adapters.protocol import Capabilities, Case
from adapters.reference import ReferenceAdapter, ReferenceCase
from fuzz.errors import EngineError
from fuzz.internal.messages import CloneCommand
from fuzz.runner import Session, Settings
from fuzz.testing import run_cases
from refmodel import (
    CrashAt,
    Fork,
    Query,
    Race,
    Recover,
    Resume,
    Start,
    Tamper,
    TwinRecover,
    Workflow,
)

WF = Workflow(3, {2}, ("a", "b"))


@pytest.fixture
def runner(tmp_path):
    adapter = ReferenceAdapter()
    session = Session(adapter, adapter.variants()[0], tmp_path, Settings(keep_cases=True))
    r = session.case(WF)
    yield r
    r.close()


@pytest.mark.parametrize("phase, fired", [
    ("before_effect", []),
    ("in_flight", [("t0", 1, None)]),
    ("after_commit", [("t0", 1, None)]),
])
def test_sigkill_kills_the_worker_inside_the_intended_task_and_phase(runner, phase, fired):
    killed = runner._worker()
    obs = runner.apply(Start("t0", crash=CrashAt(1, phase, "sigkill")))
    assert obs.outcome == "crashed"
    assert list(obs.effects) == fired  # the ledger survived the SIGKILL
    assert killed.exitcode == -signal.SIGKILL
    # The state was read, and the next operation runs, in a fresh worker on the same store.
    assert runner.worker is not killed and runner.worker.alive()
    assert obs.state.done == ((1,) if phase == "after_commit" else ())
    again = runner.apply(Recover("t0"))
    assert again.outcome == "interrupted"


def test_exception_crash_keeps_the_worker(runner):
    pid = runner._worker().process.pid
    obs = runner.apply(Start("t0", crash=CrashAt(1, "in_flight", "exception")))
    assert obs.outcome == "crashed" and obs.effects == (("t0", 1, None),)
    assert runner.worker.process.pid == pid and runner.worker.alive()


def test_ledger_rows_match_the_effects_of_each_operation(runner):
    runner.apply(Start("t0"))
    obs = runner.apply(Resume("t0", value="b"))
    assert obs.effects == (("t0", 2, "b"), ("t0", 3, None))
    assert runner.ledger.rows(1) == [("t0", 1, None)]
    assert runner.ledger.rows(2) == [("t0", 2, "b"), ("t0", 3, None)]


def test_race_runs_k_processes_on_one_store(runner):
    runner.apply(Start("t0"))
    obs = runner.apply(Race("t0", values=("a", "a", "a"), forced=True))
    pids = runner.ledger.db.execute("select distinct pid from effects where seq = 2").fetchall()
    assert len(pids) == 1  # one winner wrote the effects...
    racers = runner.ledger.db.execute("select distinct racer from effects where seq = 2").fetchall()
    assert racers[0][0] in (1, 2, 3)
    assert sorted(obs.outcome.split("|")) == ["completed", "rejected", "rejected"]  # ...of three


def test_twin_recover_clones_the_store_byte_for_byte(runner, tmp_path):
    runner.apply(Start("t0", crash=CrashAt(1, "after_commit", "sigkill")))
    store = {p.name: p.read_bytes() for p in runner.workdir.iterdir()}
    clone = tmp_path / "clone"
    clone.mkdir()
    status, reply = runner._worker().call(CloneCommand(str(clone)), 10)
    assert status == "reply" and reply.kind == "ok"
    assert {p.name: p.read_bytes() for p in clone.iterdir()} == store
    obs = runner.apply(TwinRecover("t0"))
    assert obs.twin is not None and obs.twin.outcome == obs.outcome == "interrupted"


@pytest.mark.parametrize("how", ["corrupt", "invalid", "forged"])
def test_tamper_really_changes_what_is_stored(runner, how):
    runner.apply(Start("t0"))
    head = runner.workdir / "t0.head.json"
    before = head.read_bytes()
    runner.apply(Tamper("t0", how=how))
    assert head.read_bytes() != before
    assert runner.apply(Resume("t0", value="a")).outcome == "rejected"


def test_fork_branch_is_queryable(runner):
    runner.apply(Start("t0"))
    runner.apply(Fork("t0", gate=2, value="b", new_thread="f1"))
    obs = runner.apply(Query("f1"))
    assert obs.state.answers == ((2, "b"),) and obs.state.status == "completed"


def _runner_of(case_class, tmp_path, op_timeout: float, **settings):
    """A case runner, in forked workers, on the reference target with ``case_class`` as its case."""
    class Adapter(ReferenceAdapter):
        def open(self, variant, workflow, workdir):
            return case_class(workflow, workdir, None)

    adapter = Adapter()
    session = Session(adapter, adapter.variants()[0], tmp_path,
                      Settings(op_timeout=op_timeout, **settings))
    return session.case(WF)


class _Hangs(ReferenceCase):
    def run(self, op, hooks):
        os.read(os.pipe()[0], 1)  # blocks forever: an operation that never answers


def test_an_operation_that_does_not_answer_is_stuck_and_its_worker_killed(tmp_path):
    runner = _runner_of(_Hangs, tmp_path, op_timeout=1.0)
    try:
        obs = runner.apply(Start("t0"))
        assert obs.outcome == "stuck"
        assert runner.worker is not None
        # Before the kill, the worker's stacks were asked for: the verdict says where it waited.
        assert obs.error.startswith("no answer within 1.0s, waiting in run (test_runner.py:")
        assert "Current thread" in "\n".join(runner.log)
    finally:
        runner.close()


class _SaysFrozen(ReferenceCase):
    def run(self, op, hooks):
        raise RuntimeError(f"frozen={gc.get_freeze_count()}")


def test_a_forked_worker_freezes_what_it_inherits_and_the_parent_does_not(tmp_path):
    from fuzz.errors import HarnessFailure

    runner = _runner_of(_SaysFrozen, tmp_path, op_timeout=30.0)
    try:
        with pytest.raises(HarnessFailure) as failed:
            runner.apply(Start("t0"))
    finally:
        runner.close()
    frozen = int(re.search(r"frozen=(\d+)", str(failed.value)).group(1))
    assert frozen > 1000  # the interpreter, the test run: all inherited, all frozen
    assert gc.get_freeze_count() == 0  # the parent's own collections are untouched


class _Cycle:
    pass


class _HoldsWeakly(ReferenceCase):
    """Makes a reference cycle in its first operation and keeps only a weak reference to it,
    as LlamaIndex's runtime keeps a run idle at a question; says at the next one whether the
    cycle is still there.  The worker's automatic collections are off (this process only), so
    only a collection the worker was told to run can have freed it."""

    def __init__(self, *args):
        super().__init__(*args)
        gc.disable()
        self.cycle = None

    def run(self, op, hooks):
        if self.cycle is None:
            made = _Cycle()
            made.me = made
            self.cycle = weakref.ref(made)
            return super().run(op, hooks)
        raise RuntimeError(f"alive={self.cycle() is not None}")


@pytest.mark.parametrize("collect", [False, True])
def test_collect_garbage_runs_a_full_collection_before_each_operation(tmp_path, collect):
    from fuzz.errors import HarnessFailure

    runner = _runner_of(_HoldsWeakly, tmp_path, op_timeout=30.0, collect_garbage=collect)
    try:
        runner.apply(Start("t0"))
        with pytest.raises(HarnessFailure) as said:
            runner.apply(Start("t1"))
    finally:
        runner.close()
    assert f"alive={not collect}" in str(said.value)


def test_waiting_in_names_the_wait_and_the_code_that_called_into_it():
    import sysconfig

    from fuzz.transport import waiting_in

    lib = sysconfig.get_paths()["stdlib"]
    dump = (
        'Thread 0x00007f0000000001 (most recent call first):\n'
        f'  File "{lib}/threading.py", line 331 in wait\n\n'
        'Current thread 0x00007f0000000002 (most recent call first):\n'
        f'  File "{lib}/selectors.py", line 468 in select\n'
        f'  File "{lib}/asyncio/base_events.py", line 1884 in _run_once\n'
        '  File "/src/adapters/llamaindex/case_server.py", line 142 in run\n'
        '  File "/src/fuzz/internal/worker.py", line 213 in _run_op\n')
    assert waiting_in(dump) == ("select (selectors.py:468), "
                                "called from run (case_server.py:142)")
    assert waiting_in(dump.replace(f"{lib}/selectors.py", "/src/x.py")) == "select (x.py:468)"
    assert waiting_in("") == "" and waiting_in("Current thread 0x1:\n") == ""


def test_protocol_defaults_declare_everything_expressible():
    caps = Capabilities()
    assert "race" in caps.operations and caps.intents == {"resume": "RETRY", "fork": "FORK"}
    with pytest.raises(NotImplementedError):
        Case().run(None, None)


def test_deviation_scope_limits_what_it_covers():
    from adapters.protocol import Deviation

    d = Deviation("Replay", "doc", "scope", ops=frozenset({"recover"}),
                  after_crash_kinds=frozenset({"sigkill"}))
    assert d.covers("Replay", "recover", "sigkill")
    assert not d.covers("Replay", "recover", "exception")
    assert not d.covers("Replay", "resume", "sigkill")
    assert not d.covers("Stuck", "recover", "sigkill")
    assert Deviation("Replay", "doc", "scope").covers("Replay", "fork", None)


def test_a_deviation_limited_to_rules_covers_only_the_findings_they_name():
    from adapters.protocol import Deviation

    d = Deviation("ForkIgnore", "doc", "scope", ops=frozenset({"fork"}),
                  rules=frozenset({"fork-answered-earlier-gate"}))
    assert d.covers("ForkIgnore", "fork", None, "fork-answered-earlier-gate")
    assert not d.covers("ForkIgnore", "fork", None, "fork-never-consumed")
    assert not d.covers("ForkIgnore", "fork", None, "fork-gate-not-run")
    assert Deviation("ForkIgnore", "doc", "scope").covers("ForkIgnore", "fork", None,
                                                         "fork-gate-not-run")
    # A rule of another category, or a misspelt one, is refused when the adapter builds it:
    # it would cover nothing, and the weakening would silently stop applying.
    for wrong in ("recovery-refires-completed", "fork-answered-earlier-gates"):
        with pytest.raises(ValueError, match="name no classification rule"):
            Deviation("ForkIgnore", "doc", "scope", rules=frozenset({wrong}))


class _LimitedAdapter(ReferenceAdapter):
    def deviations(self, variant):
        from adapters.protocol import Deviation

        return [Deviation("ForkIgnore", "doc", "re-runs", ops=frozenset({"fork"}),
                          rules=frozenset({"fork-answered-earlier-gate"})),
                Deviation("Replay", "doc", "anything")]


def test_targets_shows_each_deviations_limits(monkeypatch, capsys):
    import json
    import sys
    import types

    from fuzz.cli import main

    module = types.ModuleType("rf_test_limited")
    module.LimitedAdapter = _LimitedAdapter
    monkeypatch.setitem(sys.modules, "rf_test_limited", module)
    assert main(["targets", "rf_test_limited:LimitedAdapter"]) == 0
    text = capsys.readouterr().out
    assert "D ForkIgnore [ops: fork; rules: fork-answered-earlier-gate]: re-runs" in text
    assert "D Replay: anything" in text
    assert main(["targets", "rf_test_limited:LimitedAdapter", "--json"]) == 0
    limited, unlimited = json.loads(capsys.readouterr().out)["variants"][0]["deviations"]
    assert (limited["ops"], limited["rules"]) == (["fork"], ["fork-answered-earlier-gate"])
    assert "rules" not in unlimited and "ops" not in unlimited


def test_an_inprocess_case_keeps_its_ledger_in_memory_and_refuses_races(tmp_path):
    adapter = ReferenceAdapter()
    session = Session(adapter, adapter.variants()[0], tmp_path,
                      Settings(keep_cases=True, mode="inprocess"))
    r = session.case(WF)
    try:
        obs = r.apply(Start("t0"))
        assert obs.effects == (("t0", 1, None),) and obs.outcome == "interrupted"
        assert r.apply(Resume("t0", value="a")).effects == (
            ("t0", 2, "a"), ("t0", 3, None))
        assert r.ledger.path is None and not r.ledger_path.exists()
        with pytest.raises(EngineError, match="needs worker processes"):
            r.apply(Race("t0", values=("a", "b")))
    finally:
        r.close()


def test_the_inprocess_ledger_answers_as_the_ledger_file_does(tmp_path):
    # The in-process list stands in for the SQLite file: the runner reads both with the same
    # two calls (``rows`` for the observation, ``count`` to cross-check a worker's counter).
    from fuzz.internal.ledger import Ledger, MemoryLedger

    firings = [(1, "t0", 1, None, 0), (2, "t0", 2, "a", 0), (2, "f1", 2, "b", 1),
               (2, "t0", 3, None, 0), (3, "f1", 1, None, 0)]
    on_disk, in_memory = Ledger(tmp_path / "ledger.sqlite"), MemoryLedger()
    try:
        for row in firings:
            on_disk.fire(*row)
            in_memory.fire(*row)
        for seq in (1, 2, 3, 4):
            assert in_memory.rows(seq) == on_disk.rows(seq)
            for branch in ("t0", "f1"):
                for racer in (0, 1):
                    assert in_memory.count(seq, branch, racer) == on_disk.count(seq, branch, racer)
        assert in_memory.rows(2) == [("t0", 2, "a"), ("f1", 2, "b"), ("t0", 3, None)]
        in_memory.fire(4, "t0", 1, None)  # one firing more: the two now disagree
        assert in_memory.rows(4) != on_disk.rows(4) and in_memory.count(4, "t0") == 1
    finally:
        on_disk.close()
        in_memory.close()


def _at_the_crash_point(conn):
    from fuzz.internal.worker import sigkill_barrier

    sigkill_barrier(conn)


def test_a_sigkill_crash_point_kills_the_worker_itself_once_the_parent_is_told():
    # The worker once blocked at the point until its parent killed it: its other threads ran on
    # for that round trip, and LangGraph's background writer saved what a process dying right
    # there loses (StateMismatch-d61237a98dcb: the engine 0 of 30, the script 4 of 10).  The
    # parent here reads the message and never kills: the worker must be dead all the same.
    import multiprocessing

    from fuzz.internal import messages as m

    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    worker = ctx.Process(target=_at_the_crash_point, args=(child,))
    worker.start()
    try:
        assert parent.recv() == m.Barrier(m.SIGKILL)
        worker.join(60)  # a bound, not a wait for timing: dead by now, or it never will be
        assert worker.exitcode == -signal.SIGKILL
    finally:
        if worker.is_alive():
            worker.kill()
            worker.join()


class _NoReuse(ReferenceAdapter):
    """The reference target with ``Tuning.reuse_worker`` left at its default (False)."""

    def tuning(self, variant):
        from dataclasses import replace

        return replace(super().tuning(variant), reuse_worker=False)


_OPS = (Start("t0"), Resume("t0", value="a"), Fork("t0", gate=2, value="b", new_thread="t1"))


def _cases(session, n: int, ops=_OPS):
    """Run ``ops`` as ``n`` cases of ``session``: each case's worker pid and observations."""
    return run_cases(session, WF, ops, n)


def test_a_worker_serves_the_next_case_only_where_the_variant_allows_it(tmp_path):
    reference = ReferenceAdapter()
    assert reference.tuning(reference.variants()[0]).reuse_worker
    with Session(reference, reference.variants()[0], tmp_path / "reused") as session:
        reused, seen = _cases(session, 3)
    assert len(set(reused)) == 1  # one worker served all three
    with Session(reference, reference.variants()[0], tmp_path / "fresh",
                 Settings(reuse=False)) as session:
        fresh, alone = _cases(session, 3)
    assert len(set(fresh)) == 3
    assert seen == alone  # a case in a reused worker is observed as in a fresh one
    assert seen[0] == seen[1] == seen[2]  # and nothing of a case reaches the next
    undeclared = _NoReuse()
    with Session(undeclared, undeclared.variants()[0], tmp_path / "undeclared") as session:
        pids, _ = _cases(session, 3)
    assert len(set(pids)) == 3


def _races(session, cases: int):
    """``cases`` cases that each race three racers: the pid of every racer, in order, and the
    outcomes."""
    pids, outcomes, real = [], [], session.pool.racer

    def racer(*args):
        worker = real(*args)
        pids.append(worker.pid)
        return worker

    session.pool.racer = racer
    for _ in range(cases):
        runner = session.case(WF)
        outcomes.append([runner.apply(op).outcome for op in (
            Start("t0"), Race("t0", values=("a", "a", "a"), forced=True), Query("t0"))])
        runner.close()
    return pids, outcomes


def test_the_racers_of_a_race_serve_the_next_race_only_where_workers_are_reused(tmp_path):
    """Half of a reference campaign's forks were racers: where the variant reuses workers, the
    racers of a finished race stay (their case closed) and run the next race's resumes; a
    fresh one for each racer otherwise, and where a racer's case leaves a thread behind."""
    reference = ReferenceAdapter()
    with Session(reference, reference.variants()[0], tmp_path / "reused") as session:
        reused, seen = _races(session, 3)
    assert len(reused) == 9 and len(set(reused)) == 3  # three processes ran every racer
    assert set(reused[3:6]) == set(reused[:3]) == set(reused[6:])
    with Session(reference, reference.variants()[0], tmp_path / "fresh",
                 Settings(reuse=False)) as session:
        fresh, alone = _races(session, 3)
    assert len(set(fresh)) == 9
    assert seen == alone == [["interrupted", "completed|rejected|rejected", "ok"]] * 3
    leaky = _Leaky("thread", tmp_path)
    with Session(leaky, leaky.variants()[0], tmp_path / "leaky") as session:
        left, _ = _races(session, 2)
        assert session.left_behind >= 6 and "left-running" in session.last_left
    assert len(set(left)) == 6


class _Leaky(ReferenceAdapter):
    """The reference target, reuse declared, whose cases leave ``leave`` behind at close: a
    thread still running, or a file open outside the case's directory."""

    def __init__(self, leave: str, outside: Path):
        super().__init__()
        self.leave, self.outside = leave, outside

    def open(self, variant, workflow, workdir):
        import threading

        case = super().open(variant, workflow, workdir)
        if self.leave == "thread":
            stop = threading.Event()
            threading.Thread(target=stop.wait, name="left-running", daemon=True).start()
        elif self.leave == "file":
            self.kept = getattr(self, "kept", []) + [open(self.outside / str(id(case)), "w")]
        return case


@pytest.mark.parametrize("leave, named", [("thread", "left-running"), ("file", "outside"),
                                          ("nothing", None)])
def test_a_worker_whose_case_leaves_a_thread_or_a_file_behind_is_not_reused(tmp_path, leave,
                                                                            named):
    """``reuse_worker`` is the adapter's word; the part a process can check is checked: a
    thread or an open file (outside the case's own directory) still alive after ``Case.close``
    makes the worker exit instead of serving the next case, and is counted."""
    (tmp_path / "outside").mkdir()
    adapter = _Leaky(leave, tmp_path / "outside")
    # Spares cold: a warmed one would leave the same behind in its throwaway case (counted
    # too: the next test).
    with Session(adapter, adapter.variants()[0], tmp_path / "cases",
                 Settings(warm_spares=False)) as session:
        pids, seen = _cases(session, 3)
        left, last = session.left_behind, session.last_left
    if named is None:
        assert len(set(pids)) == 1 and left == 0 and last == ""
    else:
        assert len(set(pids)) == 3 and left == 3 and named in last
    assert seen[0] == seen[1] == seen[2]


class _Opened(ReferenceAdapter):
    """The reference target, writing down each case it opens: the worker's pid and the
    case's directory (a warm-up's is ``warm-*/store``), in ``log``."""

    def __init__(self, log: Path, leave: bool = False, hang: bool = False):
        super().__init__()
        self.log, self.leave, self.hang = log, leave, hang

    def open(self, variant, workflow, workdir):
        import threading

        with open(self.log, "a") as f:
            f.write(f"{os.getpid()} {Path(workdir).parent.name}\n")
        if Path(workdir).parent.name.startswith("warm-"):
            if self.leave:
                threading.Thread(target=threading.Event().wait, name="warm-left",
                                 daemon=True).start()
            if self.hang:  # a throwaway case that never ends: its worker is killed
                threading.Event().wait()
        return super().open(variant, workflow, workdir)

    def cleanup(self, variant, workdir):
        with open(self.log, "a") as f:
            f.write(f"cleanup {Path(workdir).parent.name}\n")

    def opened(self) -> list:
        return [tuple(line.split()) for line in self.log.read_text().splitlines()]


KILLED_THEN_RECOVERED = (Start("t0", crash=CrashAt(1, "before_effect", "sigkill")),
                         Recover("t0"), Resume("t0", value="b"))


def test_a_spare_warms_up_on_a_throwaway_case_of_its_own_before_it_recovers(tmp_path):
    """Where workers are reused, the spare forked while a SIGKILL op runs opens a throwaway
    case (its own directory under the session's, never the case's store) and runs it before
    it takes the recovery: the recovery's worker has served a case, as a reused one has.  The
    observations are those of cold spares, the throwaway case leaves no directory, and nothing
    of it reaches the case's effects."""
    adapter = _Opened(tmp_path / "opened.log")
    variant = adapter.variants()[0]
    with Session(adapter, variant, tmp_path / "warm") as session:
        pids, warm = _cases(session, 1, KILLED_THEN_RECOVERED)
        # Once a kill has run, a warm spare is kept ready beside the reused worker, forked
        # before the next kill op begins: two idle workers between cases.
        assert session.pool.killing and len(session.pool.idle()) == 2
        more, seen = _cases(session, 1, KILLED_THEN_RECOVERED)
        pids, warm = pids + more, warm + seen
        left = session.left_behind
    assert not list((tmp_path / "warm").glob("warm-*"))  # every throwaway case went with it
    opened = adapter.opened()
    for pid in pids:  # the worker that recovered warmed up first, then took the case
        mine = [where for who, where in opened if who == str(pid)]
        assert mine[0].startswith("warm-") and mine[1].startswith("case-"), opened
    assert left == 0
    (tmp_path / "opened.log").unlink()
    with Session(adapter, variant, tmp_path / "cold", Settings(warm_spares=False)) as session:
        _, cold = _cases(session, 2, KILLED_THEN_RECOVERED)
    assert not any(where.startswith("warm-") for _, where in adapter.opened())
    assert warm == cold and warm[0][0].outcome == "crashed"
    assert [o.effects for o in warm[0]] == [(), (("t0", 1, None),),
                                            (("t0", 2, "b"), ("t0", 3, None))]


def test_a_spare_whose_throwaway_case_leaves_something_behind_is_not_used(tmp_path):
    """A warm-up is checked as a case is (``worker.Residue``): a spare whose throwaway case
    left a thread running is counted and let go; a fresh worker recovers instead."""
    adapter = _Opened(tmp_path / "opened.log", leave=True)
    with Session(adapter, adapter.variants()[0], tmp_path / "cases") as session:
        pids, seen = _cases(session, 1, KILLED_THEN_RECOVERED)
        left, last = session.left_behind, session.last_left
    opened = adapter.opened()
    assert left == 1 and "warm-left" in last
    assert not any(who == str(pids[0]) and where.startswith("warm-") for who, where in opened)
    assert [o.outcome for o in seen[0]] == ["crashed", "interrupted", "completed"]


def test_a_killed_worker_is_replaced_and_a_reused_one_retires(tmp_path, monkeypatch):
    import fuzz.pools

    monkeypatch.setattr(fuzz.pools, "CASES_PER_WORKER", 2)
    adapter = ReferenceAdapter()
    with Session(adapter, adapter.variants()[0], tmp_path) as session:
        pids, _ = _cases(session, 3, ops=(Start("t0"),))
        assert pids[0] == pids[1] != pids[2]  # two cases, then a fresh worker
        runner = session.case(WF)
        try:
            killed = runner.apply(Start("t0", crash=CrashAt(1, "in_flight", "sigkill")))
            assert killed.outcome == "crashed"
            survivor = runner.worker.pid  # the spare forked while the sigkill op ran
            assert survivor != pids[2]
            assert runner.apply(Recover("t0")).outcome == "interrupted"
        finally:
            runner.close()
        after, _ = _cases(session, 1, ops=(Start("t0"),))
        assert after == [survivor]  # the recovering worker closed normally: it stays
    # Each reused worker's case directory went with its case.
    assert not any(tmp_path.glob("case-*"))


def test_a_throwaway_case_that_never_ends_costs_its_spare_and_is_cleaned_up(tmp_path):
    """A spare stuck in its warm-up is killed where it is waited for (the recovery, after
    the op time limit; the session's close, after a second) and its throwaway case is cleaned
    up by the adapter's ``cleanup`` and removed: nothing of it outlives the session (a
    database an adapter made for it, say).  The recovery then runs in a fresh worker."""
    adapter = _Opened(tmp_path / "opened.log", hang=True)
    with Session(adapter, adapter.variants()[0], tmp_path / "cases",
                 Settings(op_timeout=1.5)) as session:
        _, seen = _cases(session, 1, KILLED_THEN_RECOVERED)
    assert [o.outcome for o in seen[0]] == ["crashed", "interrupted", "completed"]
    opened = adapter.opened()
    warmed = sorted({where for who, where in opened if where.startswith("warm-")})
    cleaned = sorted(where for who, where in opened
                     if who == "cleanup" and where.startswith("warm-"))
    assert len(warmed) == 2 and cleaned == warmed, opened  # the recovery's spare, the next one
    assert not list((tmp_path / "cases").glob("warm-*"))


class _Cleans(_Opened):
    """``_Opened``, whose tuning says whether its cases need ``cleanup``
    (``Tuning.needs_cleanup``)."""

    def __init__(self, log: Path, needs: bool):
        super().__init__(log)
        self.needs = needs

    def tuning(self, variant):
        from dataclasses import replace

        return replace(super().tuning(variant), needs_cleanup=self.needs)


@pytest.mark.parametrize("needs", [True, False])
def test_cleanup_runs_only_for_a_variant_that_keeps_something_outside_its_workdir(tmp_path, needs):
    """A case whose worker closed normally, a case whose worker was killed (the cleanup then
    needs a worker of its own) and a spare's throwaway case: each is cleaned up by the
    adapter's ``cleanup`` when the variant says it needs it, and none is when it says its
    workdir holds everything; the observations are the same either way."""
    adapter = _Cleans(tmp_path / "opened.log", needs)
    with Session(adapter, adapter.variants()[0], tmp_path / "cases") as session:
        _, seen = _cases(session, 1, KILLED_THEN_RECOVERED)  # closes normally
        runner = session.case(WF)
        killed = runner.apply(Start("t0", crash=CrashAt(1, "before_effect", "sigkill")))
        runner.close()  # its last worker was killed: no worker of the case to run it
    assert [o.outcome for o in seen[0]] == ["crashed", "interrupted", "completed"]
    assert killed.outcome == "crashed"
    cleaned = [where for who, where in adapter.opened() if who == "cleanup"]
    warmed = {where for _, where in adapter.opened() if where.startswith("warm-")}
    if needs:
        assert {"case-000001", "case-000002"} <= set(cleaned), cleaned
        assert warmed and warmed <= set(cleaned), (warmed, cleaned)
    else:
        assert warmed and cleaned == [], cleaned
    assert not list((tmp_path / "cases").glob("*-0*"))  # every directory removed either way


class _SlowCleanup(ReferenceAdapter):
    """The reference target with a cleanup that takes longer than the deadline's grace (a
    third-party store's: its factory's connect and migrations, then the drop)."""

    def __init__(self, marker: Path):
        super().__init__()
        self.marker = marker

    def cleanup(self, variant, workdir):
        import time

        time.sleep(1.5)  # the slow server, not a crash point: nothing here races
        with open(self.marker, "a") as f:
            f.write(f"{workdir}\n")


def test_a_cleanup_is_not_cut_short_by_the_deadline(tmp_path):
    """A case whose worker died (a crash point, or the deadline cutting its op short) is
    cleaned up by a short-lived worker; once the deadline has passed the session's grace is
    one second, and a cleanup killed after it would leave its database behind for good.  The
    cleanup gets the op time limit instead."""
    import time
    from dataclasses import replace

    adapter = _SlowCleanup(tmp_path / "cleaned")
    with Session(adapter, adapter.variants()[0], tmp_path / "cases") as session:
        runner = session.case(WF)
        runner.apply(Start("t0"))
        runner.worker.kill()  # as a deadline or a crash point leaves it
        session.settings = replace(session.settings, deadline=time.monotonic() - 1)
        assert session.policy.grace() == 1.0
        runner.close()
    assert str(runner.workdir) in (tmp_path / "cleaned").read_text().splitlines()

