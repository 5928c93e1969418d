"""The nightly run: campaigns on every installed target, a full corpus replay, the matrix.

1. For each target (default: every framework adapter installed in this environment, plus
   ``reference``), a time-boxed campaign per variant; ``jobs`` campaigns run at once, each in a
   process forked from this one (the framework is imported once, here).
2. Every corpus entry whose target is installed is replayed (a timing-dependent one in
   ``corpus.replays_for`` trials, unchanged while its status comes up in any, except a
   FIXED entry whose finding came back).  An entry whose
   status differs from the one it recorded, in a replay that reached its finding
   (``replay.reached``), is flagged (``FIXED``: a release fixed the behaviour; ``CHANGED``: it
   now diverges differently) and its recorded status is updated, so the change shows up as a
   diff; so is the verdict of a finding that came back judged otherwise (a documented
   deviation declared or narrowed since).  Both by ``replay.updated``, the rule ``replay
   --update`` records by.
3. Redundant entries are removed with their reports (``corpus.duplicates``: one failing entry
   per variant, category, verdict and mechanism), so that nightly campaigns that find a known
   defect again do not pile up entries that CI replays and maintainers read for nothing.
4. The matrix is rendered (Markdown and HTML) from the evidence and the corpus, and the defect
   ledger (``results/defects.md``) beside it.

Targets that are not installed here are reported, counted, and skipped: the nightly workflow
runs one job per framework, each in its own environment.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import multiprocess

from . import corpus, defects, evidence, matrix
from .campaign import CampaignOptions, fuzz_variant
from .errors import TargetUnavailable
from .internal import lifetime
from .replay import Replayer, reached, summarize, updated
from .targets import FRAMEWORKS, prepare, resolve
from .trace import dump_trace, load_trace

_ctx = multiprocess.get_context("fork")


@dataclass
class NightlyOptions:
    targets: list[str] | None = None
    per_campaign: float = 600.0  # seconds per (target, variant) campaign, at most
    total: float = 3600.0  # seconds for all campaigns together
    max_examples: int | None = None  # a fixed example budget per campaign instead of time
    jobs: int = 1
    seed: int | None = None
    profile: str = "nightly"
    op_timeout: float = 60.0
    corpus_dir: Path = corpus.CORPUS_DIR
    reports_dir: Path = Path("shrink_reports")
    results_dir: Path = evidence.RESULTS_DIR
    matrix_base: Path = Path("results") / "matrix"  # writes .md and .html next to each other


@dataclass
class NightlySummary:
    campaigns: list = field(default_factory=list)  # {"target", "variant", "examples", ...}
    unavailable: dict = field(default_factory=dict)  # target -> why
    replays: list = field(default_factory=list)  # ReplayResult.to_json()
    changed: list = field(default_factory=list)  # entries whose status changed
    deduped: list = field(default_factory=list)  # [redundant entry, the entry kept]
    matrix: list = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict:
        return dict(self.__dict__)


def run_nightly(options: NightlyOptions, log=print) -> NightlySummary:
    started = time.monotonic()
    summary = NightlySummary()
    names = options.targets or ["reference", *FRAMEWORKS]
    adapters = {}
    for name in names:
        try:
            adapters[name] = prepare(resolve(name))
        except TargetUnavailable as exc:
            summary.unavailable[name] = str(exc)
            log(f"not installed here, skipped: {exc}")
    jobs = [(name, variant) for name, adapter in adapters.items() for variant in adapter.variants()]
    if jobs:
        budget = min(options.per_campaign, options.total * options.jobs / len(jobs))
        log(f"{len(jobs)} campaigns, {options.jobs} at a time, "
            + (f"{options.max_examples} examples each" if options.max_examples
               else f"{budget:.0f}s each"))
        summary.campaigns = _run_jobs(adapters, jobs, budget, options, log)
    if lifetime.stop_signal() is None:  # a stopped run renders what it has, replays nothing
        _replay_corpus(adapters, options, summary, log)
        _dedupe(options, summary, log)
    rows = matrix.build(None, options.results_dir, options.corpus_dir, options.reports_dir)
    base = Path(options.matrix_base)
    base.parent.mkdir(parents=True, exist_ok=True)
    from adapters.files import atomic_write_text

    rows = matrix.relative_links(rows, base.parent)  # both pages sit in one directory
    for fmt in ("md", "html"):
        out = base.with_suffix("." + fmt)
        atomic_write_text(out, matrix.render(rows, fmt))
        summary.matrix.append(str(out))
    # The defect ledger beside the matrix, whose cells link to it (``defects.md#<id>``).
    ledger = base.parent / "defects.md"
    found = defects.build(None, options.corpus_dir, options.reports_dir,
                          Path(options.results_dir) / evidence.UPSTREAM_NAME)
    atomic_write_text(ledger, defects.render_md(found, base.parent))
    summary.matrix.append(str(ledger))
    summary.seconds = round(time.monotonic() - started, 2)
    return summary


def _dedupe(options: NightlyOptions, summary: NightlySummary, log) -> None:
    """Remove the entries another entry makes redundant, with their reports (step 3)."""
    paths = corpus.entries(None, options.corpus_dir)
    for redundant, kept in corpus.duplicates(paths):
        corpus.remove(redundant, options.reports_dir)
        summary.deduped.append([str(redundant), str(kept)])
        log(f"redundant, removed: {redundant} (kept {kept})")


def _campaign(adapter, variant, budget, options: NightlyOptions) -> dict:
    copts = CampaignOptions(max_examples=options.max_examples, max_time=None if
                            options.max_examples else budget, seed=options.seed,
                            profile=options.profile, op_timeout=options.op_timeout,
                            corpus_dir=options.corpus_dir, reports_dir=options.reports_dir,
                            results_dir=options.results_dir)
    result = fuzz_variant(adapter, variant, copts, options.max_examples,
                          None if options.max_examples else budget)
    evidence.record(adapter, variant, result, options.results_dir)
    return {"target": adapter.name, "variant": variant.name, "examples": result.examples,
            "operations": result.operations, "seconds": result.seconds,
            "findings": [f.to_json() for f in result.findings], "flaky": result.flaky,
            **({"error": "; ".join(result.errors)} if result.errors else {})}


def job_cores(jobs: int, cpus) -> list | None:
    """The CPU each of ``jobs`` job slots is pinned to (a campaign and the workers it forks
    inherit it), or None: not pinned.

    Pinned only when the jobs fill the CPUs evenly (``jobs`` a multiple of their number): then
    no core is left for a campaign's own side work (its spare worker forked, its closing worker
    cleaning up, while its parent goes on), which an unpinned campaign spreads over the other
    jobs' cores, migrating and interrupting them.  Measured on 2 cores
    (benchmarks/history/round-19.md): ``--jobs 2`` ran more examples a second pinned in 3 of 4
    pairs (the reference +6 % and +9 %, pydantic-graph -4 % and +25 %).  With fewer jobs than
    CPUs a campaign keeps the idle cores for that side work: not pinned.  The price: a pinned
    campaign's free race runs its racers on one CPU, where they overlap less often (two
    pydantic-graph free-race entries: 70 of 80 and 52 of 60 pinned, 79 of 80 and 58 of 60 free;
    benchmarks/README.md, "Timing-dependent findings"), so a finding's recorded rate there is a
    pinned one."""
    cpus = sorted(cpus)
    if jobs < 2 or len(cpus) < 2 or jobs % len(cpus):
        return None
    return [cpus[slot % len(cpus)] for slot in range(jobs)]


def _run_jobs(adapters, jobs, budget, options: NightlyOptions, log) -> list:
    """Run campaigns, ``options.jobs`` at a time, each in a process forked from this one (and
    pinned to a CPU of its slot when they fill the CPUs evenly: ``job_cores``)."""
    if options.jobs <= 1:
        out = []
        for name, variant in jobs:
            out.append(_campaign(adapters[name], variant, budget, options))
            log(_line(out[-1]))
            if lifetime.stop_signal():
                break
        return out
    pending, running, out = list(jobs), [], []
    forwarded = False
    cores = job_cores(options.jobs, os.sched_getaffinity(0))
    free = list(range(options.jobs))  # job slots not running a campaign
    while pending or running:
        if lifetime.stop_signal() and not forwarded:
            # Stop: no new campaign; the running ones stop cleanly and send what they found.
            pending, forwarded = [], True
            for proc, *_ in running:
                if proc.is_alive():
                    os.kill(proc.pid, signal.SIGTERM)
        while pending and len(running) < options.jobs:
            name, variant = pending.pop(0)
            parent, child = _ctx.Pipe()
            slot = free.pop(0)
            core = cores[slot] if cores else None
            proc = _ctx.Process(target=_job_main, args=(os.getpid(), child, adapters[name],
                                                        variant, budget, options, core),
                                daemon=False)
            proc.start()
            child.close()
            running.append((proc, parent, name, variant, slot))
        ready = multiprocess.connection.wait([p.sentinel for p, *_ in running]
                                             + [c for _, c, *_ in running], timeout=0.25)
        for item in list(running):
            proc, conn, name, variant, slot = item
            if conn in ready or proc.sentinel in ready:
                try:
                    result = conn.recv()
                except EOFError:
                    result = {"target": name, "variant": variant.name, "error": "job died"}
                proc.join()
                running.remove(item)
                free.append(slot)
                out.append(result)
                log(_line(result))
    return out


def _job_main(parent_pid, conn, adapter, variant, budget, options, core=None):
    # A job dies with the nightly parent too, by SIGTERM (Linux): it stops cleanly and its
    # workers die with it.  No lifeline thread: a job forks workers, which needs a single thread.
    # It keeps the stop handlers: Ctrl-C reaches it with the whole process group.
    lifetime.become_child(parent_pid, None, signal.SIGTERM, keep_signals=True)
    if core is not None:
        try:
            os.sched_setaffinity(0, {core})
        except OSError:  # a CPU taken away meanwhile (a cgroup change): run unpinned
            pass
    try:
        conn.send(_campaign(adapter, variant, budget, options))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which goes on
        conn.send({"target": adapter.name, "variant": variant.name,
                   "error": f"{type(exc).__name__}: {exc}"})


def _line(result: dict) -> str:
    if "error" in result:
        return f"  {result['target']} [{result['variant']}]: ERROR {result['error']}"
    cats = ", ".join(sorted({f["category"] for f in result["findings"]})) or "nothing found"
    return (f"  {result['target']} [{result['variant']}]: {result['examples']} examples, "
            f"{result['operations']} ops in {result['seconds']}s: {cats}")


def _replay_corpus(adapters, options: NightlyOptions, summary: NightlySummary, log) -> None:
    replayer = Replayer(options.op_timeout, adapters=adapters)
    for path in corpus.entries(None, options.corpus_dir):
        try:
            trace = load_trace(path)
        except Exception as exc:  # noqa: BLE001 - a malformed entry is an ERROR row, kept
            summary.replays.append({"path": str(path), "status": "ERROR", "detail": str(exc)})
            continue
        if trace.target not in adapters:
            continue  # its framework is not installed here: its own nightly job replays it
        # A timing-dependent entry is judged on its trials, by the rule ``replay --update``
        # records by (``replay.updated``).  A replay that never reached the finding
        # (``replay.reached``: an ERROR, or a CHANGED before the recorded step) is shown but
        # never recorded.
        results = [replayer.replay(path) for _ in range(corpus.replays_for(trace))]
        reaching = [r for r in results if reached(trace, r.status, r.step)]
        result = summarize(reaching or results)
        summary.replays.append(result.to_json())
        new = updated(trace, reaching) if reaching else trace
        if new is trace:
            continue
        if new.status != trace.status:
            was, now = trace.status or "FAILED", new.status
        else:  # the verdict: a deviation declared or narrowed since
            was, now = trace.finding.verdict, new.finding.verdict
        summary.changed.append({"path": str(path), "was": was, "now": now,
                                "detail": result.detail})
        dump_trace(new, path)
        log(f"  {now}: {path} (was {was}): {result.detail}")
