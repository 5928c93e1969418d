"""Harness overhead: an operation through the fuzzer against the same framework call in a loop.

    PYTHONPATH=$PWD .tox/adapter-langgraph/bin/python benchmarks/bench_overhead.py \
        langgraph sqlite-graph-sync-head-update [--cases 30]
    PYTHONPATH=$PWD .tox/adapter-pydantic-graph/bin/python benchmarks/bench_overhead.py \
        pydantic-graph file-single-resume_ifp-recover_ifp

One *case* is the same two operations on a fresh store (workflow: 3 tasks, gate 2):

- ``plain``: ``adapter.open`` then ``case.run(start)``, ``case.run(resume a)``, as a script would
  call the framework through the adapter, with hooks that do nothing (no ledger, no barrier),
  on a fresh directory it makes and removes (as the fuzzer makes and removes each case's: until
  the twenty-third round the loop left its directories, and the ratio charged their removal,
  about 0.8 ms a case, to the harness);
- ``plain+query``: the same, reading the persisted state back after each operation (the
  ``query`` the fuzzer needs to observe it): the framework's own cost of being observed;
- ``fuzzer``: the fuzzer's per-operation work in process (``Settings(mode="inprocess")``): the
  oracle's ``Model.step`` and ``classify``, the engine's hooks, the SQLite effect ledger and the
  ``query`` that observes the persisted state;
- ``fork``: the same through a forked worker and its pipe (the campaign default);
- ``sigkill``: ``start`` with a SIGKILL crash point in task 1, then ``recover``, through a forked
  worker (the kill, a new worker, and recovery), against ``inproc-crash``: the same two
  operations with an ``exception`` crash point, in process;
- ``sigkill-cold``: the same as ``sigkill`` with ``Settings(warm_spares=False)``: the worker
  that recovers waits for the kill cold, instead of having run a throwaway case first (where
  the variant reuses workers; elsewhere the two are the same).

The kinds are interleaved case by case, so that load on the machine hits them alike; the ratios
are of medians.  Goals: fuzzer / plain <= 1.10; sigkill / inproc-crash <= 2.  fuzzer /
plain+query is the harness's own share (oracle, hooks, ledger).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from adapters.protocol import Hooks
from fuzz.runner import Session, Settings
from fuzz.targets import prepare, resolve, select_variants
from refmodel import CrashAt, Model, Recover, Resume, Start, Workflow, World, classify

WF = Workflow(3, {2}, ("a", "b"))
PAIR = (Start("t0"), Resume("t0", value="a"))
CRASH_PAIRS = {
    "sigkill": (Start("t0", crash=CrashAt(1, "before_effect", "sigkill")), Recover("t0")),
    "inproc-crash": (Start("t0", crash=CrashAt(1, "before_effect", "exception")), Recover("t0")),
}


class _Quiet(Hooks):
    """Hooks that do nothing: the framework call alone."""

    def task_begins(self, task):
        pass

    def effect(self, task, value):
        pass

    def wants_bad_output(self, task):
        return False


def plain(adapter, variant, root: Path, query: bool = False) -> float:
    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(dir=root))
    case = adapter.open(variant, WF, workdir)
    try:
        for op in PAIR:
            case.run(op, _Quiet())
            if query:
                case.query(op.thread)
    finally:
        case.close()
        shutil.rmtree(workdir)  # as the fuzzer removes each case's directory
    return time.perf_counter() - started


def through(session: Session, ops) -> float:
    model, world = Model(WF), World()
    started = time.perf_counter()
    runner = session.case(WF)
    try:
        for op in ops:
            allowed = model.step(world, op)
            observed = runner.apply(op)
            divergence = classify(model, world, op, [o for o, _ in allowed], observed)
            if divergence is not None:  # a finding costs the same to observe; stop there
                break
            world = next(w for o, w in allowed if o.same_as(observed))
    finally:
        runner.close()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("target")
    parser.add_argument("variant")
    parser.add_argument("--cases", type=int, default=30)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    adapter = prepare(resolve(args.target))
    (variant,) = select_variants(adapter, [args.variant])
    root = Path(tempfile.mkdtemp(prefix="overhead-"))
    inproc = Session(adapter, variant, root / "in", Settings(mode="inprocess"))
    forked = Session(adapter, variant, root / "fork", Settings(mode="fork"))
    cold = Session(adapter, variant, root / "cold", Settings(mode="fork", warm_spares=False))
    kinds = {
        "plain": lambda: plain(adapter, variant, root),
        "plain+query": lambda: plain(adapter, variant, root, query=True),
        "fuzzer": lambda: through(inproc, PAIR),
        "fork": lambda: through(forked, PAIR),
        "sigkill": lambda: through(forked, CRASH_PAIRS["sigkill"]),
        "sigkill-cold": lambda: through(cold, CRASH_PAIRS["sigkill"]),
        "inproc-crash": lambda: through(inproc, CRASH_PAIRS["inproc-crash"]),
    }
    for run in kinds.values():  # warm up: first imports, first files
        run()
    times: dict = {k: [] for k in kinds}
    for _ in range(args.cases):
        for kind, run in kinds.items():
            times[kind].append(run())
    med = {k: statistics.median(v) for k, v in times.items()}
    out = {
        "target": args.target, "variant": args.variant, "cases": args.cases,
        "median_ms_per_case": {k: round(v * 1000, 2) for k, v in med.items()},
        "fuzzer/plain": round(med["fuzzer"] / med["plain"], 3),
        "fuzzer/plain+query": round(med["fuzzer"] / med["plain+query"], 3),
        "fork/plain": round(med["fork"] / med["plain"], 3),
        "sigkill/inproc-crash": round(med["sigkill"] / med["inproc-crash"], 3),
        "sigkill-cold/inproc-crash": round(med["sigkill-cold"] / med["inproc-crash"], 3),
    }
    print(json.dumps(out, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
