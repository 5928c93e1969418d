"""A campaign: fuzz one target's variants within a budget, and keep what it finds.

``run_campaign`` splits the budget (examples or seconds) evenly over the variants, runs the
differential machine on each, and turns every shrunk failure into a corpus entry and a shrink
report.  A time budget runs the machine in chunks of ``CHUNK`` examples, each with its own seed,
until the time is spent: Hypothesis has no time budget of its own.

Budgets are hard caps.  ``max_time`` becomes ``CampaignOptions.deadline``, a wall-clock instant
that generation, shrinking and timing replays all honour (the runner caps every wait by it).
``max_examples`` is Hypothesis's own count, split exactly over the variants: valid *generated*
examples.  Examples replayed from the example database (a shared failure is replayed first, by
design), draws Hypothesis discards, and shrink candidates come on top; ``example_cap`` bounds the
total run (a runaway guard; ``--max-time`` is the budget for hard limits).  A stop (the budget, SIGINT, SIGTERM) during a
shrink keeps the smallest failure seen so far, written with a note saying the shrink was cut
short.  A signal only takes effect at the runner's checkpoints, never while a finding is
written, and a finding is shown only once written: a finding once shown is never lost.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from hypothesis import Phase, Verbosity
from hypothesis.errors import Flaky, FlakyFailure
from hypothesis.stateful import run_state_machine_as_test

from adapters.protocol import Adapter, Variant

from . import corpus, evidence, report
from .errors import CampaignStopped, EngineError, Interrupted, OutOfExamples, OutOfTime
from .failures import Failure
from .internal import lifetime
from .machine import machine_for
from .profiles import profile_settings
from .runner import Session, Settings

CHUNK = 20


@dataclass
class Found:
    variant: str
    category: str
    property: str
    length: int
    verdict: str
    corpus: str
    report: str
    note: str = ""  # e.g. "shrink cut short (time limit): the best trace so far"

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass
class VariantResult:
    variant: str
    examples: int = 0
    operations: int = 0
    seconds: float = 0.0
    findings: list = field(default_factory=list)
    flaky: list = field(default_factory=list)  # failures Hypothesis could not reproduce
    errors: list = field(default_factory=list)  # engine or adapter errors that ended the run
    stopped: str | None = None  # "time limit", "example budget", "SIGINT", "SIGTERM"


@dataclass
class CampaignOptions:
    max_examples: int | None = None
    max_time: float | None = None
    seed: int | None = None
    profile: str | None = None
    op_timeout: float = 30.0
    corpus_dir: Path = corpus.CORPUS_DIR
    reports_dir: Path = report.REPORTS_DIR
    results_dir: Path | None = None  # record evidence for the matrix here (fuzz.evidence)
    workdir: Path | None = None
    stop_on_finding: bool = False  # end a variant's campaign at its first finding
    shrink: bool = True  # False: keep failures as found (smoke runs, where shrinking dominates)
    mode: str = "fork"  # the runner's process mode (fuzz.runner.MODES)
    # ``time.monotonic()`` by which everything this campaign does must be done (``--max-time``):
    # generation, shrinking, timing replays.  run_campaign sets it from max_time when unset.
    deadline: float | None = None


def run_campaign(adapter: Adapter, variants: list[Variant], options: CampaignOptions,
                 observer=None) -> list[VariantResult]:
    results = []
    if options.deadline is None and options.max_time is not None:
        options = replace(options, deadline=time.monotonic() + options.max_time)
    shares = example_shares(options.max_examples, len(variants))
    for i, variant in enumerate(variants):
        share_time = None
        if options.deadline is not None:  # what is left, shared by the variants still to run
            share_time = max(0.0, options.deadline - time.monotonic()) / (len(variants) - i)
        result = fuzz_variant(adapter, variant, options, shares[i], share_time, observer)
        if options.results_dir is not None:
            evidence.record(adapter, variant, result, options.results_dir)
        results.append(result)
        if lifetime.stop_signal() or (
                options.deadline is not None and time.monotonic() >= options.deadline):
            break
    return results


def example_cap(generated: int | None) -> int | None:
    """The most examples a variant may run for ``generated`` generated ones: database replays,
    discarded draws and shrinking on top, within bounds (``OutOfExamples`` beyond)."""
    return None if generated is None else 10 * generated + 100


def example_shares(total: int | None, k: int) -> list:
    """``total`` examples split exactly over ``k`` variants (None: each its profile's count)."""
    if total is None:
        return [None] * k
    return [total // k + (1 if i < total % k else 0) for i in range(k)]


def fuzz_variant(adapter, variant, options, max_examples, max_time, observer=None):
    """Run the machine on one variant until the budget is spent.

    After each failure the machine runs again with that category suppressed, on what is left of
    the budget, so that one frequent category cannot mask the others.
    """
    result = VariantResult(variant.name)
    started = time.monotonic()
    if max_time is not None:
        end = started + max_time
        options = replace(options, deadline=end if options.deadline is None
                          else min(end, options.deadline))
    session = Session(adapter, variant, options.workdir and Path(options.workdir) / variant.name,
                      Settings(op_timeout=options.op_timeout, mode=options.mode,
                               deadline=options.deadline))
    notify_outer = observer or (lambda event, **data: None)
    cap = example_cap(max_examples)  # every example run counts, shrinking included

    def notify(event, **data):
        if event == "example":
            if cap is not None and result.examples >= cap:
                raise OutOfExamples()
            result.examples += 1
        elif event == "op":
            result.operations += 1
        notify_outer(event, variant=variant.name, result=result, **data)

    try:
        _search(adapter, variant, options, session, result, notify, notify_outer, max_examples,
                max_time, started)
    finally:
        session.close()
    result.seconds = round(time.monotonic() - started, 2)
    return result


def _search(adapter, variant, options, session, result, notify, notify_outer, max_examples,
            max_time, started):
    budget = max_examples or profile_settings(options.profile).max_examples
    found: set = set()
    run = 0
    while True:
        best = _Best()
        machine = _watched(machine_for(session, observer=notify, suppress=frozenset(found)), best)
        overrides = {"verbosity": Verbosity.quiet}
        if not options.shrink:
            overrides["phases"] = [Phase.explicit, Phase.reuse, Phase.generate]
        if max_time is not None:
            # Size the chunk to the time left at the rate seen so far: a chunk of slow examples
            # would otherwise run far past the time box.
            elapsed = time.monotonic() - started
            rate = result.examples / elapsed if result.examples and elapsed > 0 else None
            left = max(0.0, max_time - elapsed)
            chunk = CHUNK if rate is None else max(1, min(CHUNK, int(left * rate)))
            overrides.update(max_examples=chunk if run else min(CHUNK, 5), derandomize=False)
            machine._hypothesis_internal_use_seed = (options.seed or 0) + run
        else:
            overrides["max_examples"] = budget
            if options.seed is not None:
                overrides["derandomize"] = False
                machine._hypothesis_internal_use_seed = options.seed + run
        before = result.examples
        failure = stopped = None
        try:
            run_state_machine_as_test(machine, settings=profile_settings(options.profile,
                                                                          **overrides))
        except Failure as exc:
            failure = exc
        except FlakyFailure as exc:
            failure = next((e for e in exc.exceptions if isinstance(e, Failure)), None)
            if failure is None:  # e.g. an example rejected on one run and not on the next
                result.flaky.append(str(exc).splitlines()[0])
            else:
                failure.timing = True
        except Flaky as exc:  # data generation itself differed: nothing to keep
            result.flaky.append(str(exc).splitlines()[0])
        except EngineError as exc:
            # The machinery or the adapter broke (never a verdict): this variant's campaign
            # ends here, loudly; the others go on, and the command exits 2.
            result.errors.append(str(exc).splitlines()[0])
            break
        except CampaignStopped as exc:
            # The budget or a signal ended the run, perhaps mid-shrink: keep the best so far.
            stopped, failure = exc, best.failure
            if failure is not None:
                failure.cut_short = stop_reason(exc)
        if failure is not None:
            try:
                _keep(adapter, variant, failure, options, result, notify_outer)
            except CampaignStopped as exc:  # raised again once the finding was written
                stopped = stopped or exc
            found.add(failure.divergence.category)
        if stopped is not None:
            result.stopped = stop_reason(stopped)
            break
        if failure is not None and options.stop_on_finding:
            break
        run += 1
        if max_time is not None:
            if time.monotonic() - started >= max_time:
                break
        else:
            budget -= result.examples - before
            if failure is None or budget <= 0:
                break


def stop_reason(exc: CampaignStopped) -> str:
    if isinstance(exc, Interrupted):
        return signal.Signals(exc.signum).name
    if isinstance(exc, OutOfTime):
        return "time limit"
    if isinstance(exc, OutOfExamples):
        return "example budget"
    return type(exc).__name__


class _Best:
    """The smallest failure one run has raised so far: what a shrink cut short keeps.  (Every
    candidate the shrinker accepts raised a failure and is smaller than the one before.)"""

    def __init__(self):
        self.failure = None

    def offer(self, failure: Failure) -> None:
        if self.failure is None or len(failure.history) <= len(self.failure.history):
            self.failure = failure


def _watched(machine, best: _Best):
    """``machine`` with every failure it raises offered to ``best`` (re-raised unchanged: the
    traceback still ends on the machine's own raise line, which Hypothesis identifies bugs by)."""

    class Watched(machine):
        def _check(self, op):
            try:
                super()._check(op)
            except Failure as exc:
                best.offer(exc)
                raise

    Watched.__name__ = Watched.__qualname__ = machine.__name__
    return Watched


TRIALS = 5  # replays that measure how often a timing-dependent failure reproduces


def _keep(adapter, variant, failure, options, result, notify):
    trace = corpus.entry_from_failure(failure, adapter.name, variant.name, failure.workflow,
                                      dict(adapter.versions()))
    note, stop = "", None
    if getattr(failure, "cut_short", None):
        note = f"shrink cut short ({failure.cut_short}): the best trace so far"
        trace = _noted(trace, note)
    if getattr(failure, "timing", False):
        try:
            trace = _measure_timing(adapter, trace, options)
        except CampaignStopped as exc:  # write the finding first, then stop
            stop = exc
            trace = _noted(trace, f"timing-dependent (not measured: {stop_reason(exc)})")
    # Signals act only at the runner's checkpoints, never while a finding is written; a finding
    # is shown (notify) only once its files are.
    try:
        path = corpus.save(trace, options.corpus_dir)
        script = adapter.repro_script(variant, trace.workflow, trace.operations)
        report_file = report.write(trace, path, script, options.reports_dir)
    except OSError as exc:  # checked writable up front, yet it failed: never lose it
        _spill(trace, exc, result)
        if stop is not None:
            raise stop from None
        return
    found = Found(variant.name, trace.finding.category, trace.finding.property,
                  len(trace.operations), trace.finding.verdict, str(path), str(report_file),
                  note)
    if not any(f.category == found.category and f.length <= found.length
               for f in result.findings):
        result.findings = [f for f in result.findings if f.category != found.category]
        result.findings.append(found)
    notify("finding", variant=variant.name, result=result, found=found)
    if stop is not None:
        raise stop


def _spill(trace, exc: OSError, result) -> None:
    """A finding that could not be written goes to stderr, whole, and the command exits 2."""
    import json
    import sys

    print(json.dumps(trace.to_json(), indent=2, ensure_ascii=False), file=sys.stderr)
    result.errors.append(f"could not write the {trace.finding.category} finding "
                         f"({exc.strerror or exc}: {exc.filename or ''}); its trace is printed "
                         "on stderr above")


def _noted(trace, note: str):
    return trace.with_(finding=replace(trace.finding, detail=f"{note}: {trace.finding.detail}"))


def _measure_timing(adapter, trace, options):
    """A failure Hypothesis could not reproduce every time depends on timing: say so, with the
    rate at which it reproduces over ``TRIALS`` replays."""
    from .replay import Replayer

    replayer = Replayer(options.op_timeout, adapters={adapter.name: adapter},
                        deadline=options.deadline)
    statuses = []
    try:
        for _ in range(TRIALS):
            statuses.append(replayer.replay_trace(trace).status)
    except OutOfTime:
        if not statuses:
            raise
    again = sum(s == "FAILED" for s in statuses)
    return _noted(trace, f"timing-dependent (reproduced {again}/{len(statuses)} replays)")
