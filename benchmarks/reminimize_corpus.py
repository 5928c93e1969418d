"""Re-minimize a framework's committed corpus entries and measure length / category minimum.

Run it with the framework's own tox environment, from the repository root::

    PYTHONPATH=$PWD .tox/adapter-langgraph/bin/python benchmarks/reminimize_corpus.py \
        langgraph --variants 'memory-*' 'sqlite-graph-sync-head-update' --max-time 90

For each entry it runs ``resumefuzz minimize`` (``fuzz.minimize``: the trace-level pass, each
candidate re-run on the framework) and divides the length before and after by the minimum of the
entry's category *for its variant*: the shortest exposure of that category's mutant using only
the operations the variant can express (``fuzz.minimize.category_minima``; ``resumefuzz explore
--target T --variant V`` prints the same).  Categories without a mutant (``Unclassified``) have
no minimum and are listed apart.

A second minimum, *mechanism*, restricts the search further to the kinds of operations the
original entry uses (its operation names, crash kinds and phases, tamper kinds, BadOutput or
not): a finding that goes through a tamper cannot be shorter than the category's shortest
exposure through a tamper, however short the BadOutput route is.  Where the category's mutant
shows nothing with those kinds (the StateMismatch and PrefixReplay mutants change resumes, not
forks; InvalidPersist's cannot resume a forged run that no longer has a gate pending), the
variant's minimum stands in; and the mechanism minimum is never below ``route_floor``, the
fewest operations a trace through every kind of the entry's route (``fuzz.corpus.mechanism``,
what ``dedupe`` tells defects apart by) can have at all.  ``--rate ROWS.json`` recomputes
both from an earlier ``--json`` file without running anything (originals replaced with
``--write`` are read back from git's HEAD).

Without ``--write`` the new entries go to a scratch directory and the corpus is untouched; with
it, a shorter entry replaces the old one in ``corpus/`` and its report is regenerated in
``shrink_reports/`` (``fuzz.report.write``).
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import io
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fuzz.cli import main as resumefuzz
from fuzz.corpus import mechanism as route_of
from fuzz.minimize import MINIMA_WORKFLOWS, category_minima, expressible, mechanism_caps
from fuzz.targets import prepare, resolve, select_variants
from fuzz.trace import parse_trace
from refmodel import Model, Race, Tamper, Workflow, World, candidate_ops

_MINIMA: dict = {}
_FLOORS: dict = {}


def minima_for(caps) -> dict:
    if repr(caps) not in _MINIMA:
        _MINIMA[repr(caps)] = category_minima(caps)
    return _MINIMA[repr(caps)]


def _route_search(trace, caps):
    """What ``route_traces`` and ``route_floor`` search: the route's kinds, the operations it
    may use (``expressible`` of ``mechanism_caps``), the workflows, the kinds one op adds."""
    admit = expressible(mechanism_caps(caps, trace.operations))
    values = trace.workflow.values
    shapes = [trace.workflow] + [Workflow(w.n, w.gates, values) for w in MINIMA_WORKFLOWS]

    def kinds(op) -> frozenset:
        return frozenset(route_of(trace.with_(operations=(op,))))

    return frozenset(route_of(trace)), admit, list(dict.fromkeys(shapes)), kinds


def _next_ops(model, worlds, admit, caps):
    """Each operation enabled in some world of ``worlds`` with the worlds it leads to; races
    forced where the variant can force them."""
    for op in dict.fromkeys(op for world in worlds
                            for op in candidate_ops(model, world, admit=admit)):
        if isinstance(op, Race) and caps.forced_race:
            op = Race(op.thread, op.values, forced=True)
        after = frozenset(w for world in worlds if model.enabled(world, op)
                          for _, w in model.step(world, op))
        if after:
            yield op, after


def route_traces(trace, caps, length: int):
    """``(workflow, ops)``: every trace of ``length`` operations the reference admits that goes
    through the entry's route (``fuzz.corpus.mechanism``: each of its tamper kinds, crash kinds,
    BadOutput, race, fork, ...) with nothing the entry does not use (``mechanism_caps``), on the
    entry's workflow and ``MINIMA_WORKFLOWS``; the last operation not a tamper (a tamper's own
    reply is never compared)."""
    route, admit, shapes, kinds = _route_search(trace, caps)
    for workflow in shapes:
        model = Model(workflow)

        def extend(ops, worlds, seen):
            if len(ops) == length:
                if seen == route and not isinstance(ops[-1], Tamper):
                    yield workflow, ops
                return
            for op, after in _next_ops(model, worlds, admit, caps):
                yield from extend(ops + (op,), after, seen | kinds(op))

        yield from extend((), frozenset({World()}), frozenset())


def route_floor(trace, caps) -> int:
    """The fewest operations any trace through the entry's route can have (``route_traces``,
    searched breadth first over the reference's worlds): a bound that holds whatever the target
    does, as the mutant's exposures do not."""
    route, admit, shapes, kinds = _route_search(trace, caps)
    key = (route, repr(mechanism_caps(caps, trace.operations)), tuple(shapes))
    n = len(trace.operations)
    if key not in _FLOORS:
        _FLOORS[key] = n
        for workflow in shapes:
            model = Model(workflow)
            layer = {(frozenset({World()}), frozenset(), False)}
            for depth in range(1, _FLOORS[key]):
                layer = {(after, seen | kinds(op), isinstance(op, Tamper))
                         for worlds, seen, _ in layer
                         for op, after in _next_ops(model, worlds, admit, caps)}
                if any(seen == route and not tampered for _, seen, tampered in layer):
                    _FLOORS[key] = depth
                    break
    return _FLOORS[key]


def mechanism_minimum(caps, trace) -> int | None:
    """The category's minimum through the kinds of operations the entry uses (the mutant's
    shortest exposure with them; the variant's minimum when the mutant shows none), never below
    ``route_floor``: no trace through the entry's route is shorter than that."""
    category = trace.finding.category
    minimum = minima_for(caps).get(category)
    if not minimum:
        return None
    found = minima_for(mechanism_caps(caps, trace.operations)).get(category, minimum)
    return max(found, route_floor(trace, caps))


def original(path: str):
    """An entry as committed (``--write`` may have replaced it since)."""
    if Path(path).exists():
        text = Path(path).read_text()
    else:
        text = subprocess.run(["git", "show", f"HEAD:{path}"], capture_output=True, text=True,
                              check=True).stdout
    return parse_trace(json.loads(text), path)


def rate(adapter, rows: list[dict]) -> list[dict]:
    """Add each row's variant and mechanism minima and the ratios to them."""
    out = []
    for row in rows:
        if "error" in row:
            out.append(row)
            continue
        (variant,) = select_variants(adapter, [row["variant"]])
        caps = adapter.capabilities(variant)
        minimum = minima_for(caps).get(row["category"])
        mechanism = minimum and mechanism_minimum(caps, original(row["path"]))
        out.append({**row, "minimum": minimum, "mechanism": mechanism,
                    "ratio_before": minimum and round(row["before"] / minimum, 3),
                    "ratio_after": minimum and round(row["after"] / minimum, 3),
                    "mech_before": mechanism and round(row["before"] / mechanism, 3),
                    "mech_after": mechanism and round(row["after"] / mechanism, 3)})
    return out


def run(target: str, patterns: list[str], max_time: float, write: bool) -> dict:
    adapter = prepare(resolve(target))
    root = Path("corpus") / target
    variants = sorted(d.name for d in root.iterdir() if d.is_dir()
                      and any(fnmatch.fnmatch(d.name, p) for p in patterns))
    scratch = Path(tempfile.mkdtemp(prefix="reminimize-"))
    rows = []
    for name in variants:
        args = ["minimize", str(root / name), "--json", "--max-time", str(max_time)]
        args += ["--replace"] if write else ["--corpus", str(scratch / "corpus"),
                                              "--reports", str(scratch / "reports")]
        out = io.StringIO()
        started = time.monotonic()
        with contextlib.redirect_stdout(out):
            status = resumefuzz(args)
        if status != 0:
            rows.append({"variant": name, "error": f"resumefuzz minimize exited {status}"})
            continue
        rows += rate(adapter, [{**entry, "variant": name} for entry in json.loads(out.getvalue())])
        print(f"{name}: {len(rows)} entries so far ({time.monotonic() - started:.0f}s)",
              file=sys.stderr)
    return {"target": target, "variants": variants, "max_time": max_time, "rows": rows,
            "summary": summarize(rows)}


def summarize(rows: list[dict]) -> dict:
    rated = [r for r in rows if r.get("minimum")]
    out = {"entries": len(rows), "rated": len(rated),
           "unrated": sorted({r.get("category", "?") for r in rows if not r.get("minimum")}),
           "stopped_by_deadline": sum(r.get("stopped") == "deadline" for r in rows)}
    for when in ("before", "after"):
        for key, label in (("ratio", "vs_variant_minimum"), ("mech", "vs_mechanism_minimum")):
            ratios = [r[f"{key}_{when}"] for r in rated if r.get(f"{key}_{when}")]
            if ratios:
                out.setdefault(when, {})[label] = {
                    "median": round(statistics.median(ratios), 3),
                    "mean": round(statistics.mean(ratios), 3), "max": max(ratios)}
        if rated:
            out[when]["mean_length"] = round(statistics.mean(r[when] for r in rated), 2)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target")
    parser.add_argument("--variants", nargs="+", default=["*"], metavar="GLOB")
    parser.add_argument("--max-time", type=float, default=120.0, metavar="S",
                        help="per entry (default 120)")
    parser.add_argument("--write", action="store_true",
                        help="replace corpus entries that got shorter, regenerate their reports")
    parser.add_argument("--json", metavar="FILE", help="write the rows and summary here")
    parser.add_argument("--rate", metavar="ROWS", help="only recompute minima and ratios of the "
                        "rows in an earlier --json file")
    args = parser.parse_args()
    if args.rate:
        result = json.loads(Path(args.rate).read_text())
        result["rows"] = rate(prepare(resolve(args.target)), result["rows"])
        result["summary"] = summarize(result["rows"])
    else:
        result = run(args.target, args.variants, args.max_time, args.write)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    for r in result["rows"]:
        if "error" in r:
            print(f"{r['variant']}: {r['error']}")
            continue
        print(f"{r['variant']:44} {r['category']:15} {r['before']:>3} -> {r['after']:<3} "
              f"min {r['minimum'] or '-'} mechanism {r['mechanism'] or '-'}  "
              f"({r['judged']} run, {r['stopped']}, {r['seconds']}s)")
    print(json.dumps(result["summary"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
