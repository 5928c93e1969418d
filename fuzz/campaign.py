"""A campaign: fuzz one target's variants within a budget, and keep what it finds.

``run_campaign`` splits the budget (examples or seconds) evenly over the variants, runs the
differential machine on each, and turns every shrunk failure into a corpus entry and a shrink
report.  A time budget runs the machine in chunks of ``CHUNK`` examples, each with its own seed,
until the time is spent: Hypothesis has no time budget of its own.  Chunk ``r`` of seed ``s`` is
seeded with a hash of ``(s, r)`` (``chunk_seed``), so two seeds never share a stream.

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

import hashlib
import re
import signal
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from hypothesis import Phase, Verbosity, reject
from hypothesis.control import currently_in_test_context
from hypothesis.errors import Flaky
from hypothesis.stateful import run_state_machine_as_test

from adapters.protocol import Adapter, Variant

from . import corpus, evidence, report, reprocheck
from .errors import (
    CampaignStopped,
    EngineError,
    HarnessFailure,
    Interrupted,
    OutOfExamples,
    OutOfTime,
)
from .failures import Failure
from .internal import lifetime
from .internal.flaky import Best, kept_failure, watched
from .machine import machine_for
from .profiles import database_key, profile_settings
from .rate import TRIALS, Rate
from .runner import Session, Settings
from .trace import UNMEASURED

CHUNK = 20
HARNESS_SHARE = 0.2  # harness errors in more than this share of examples end a variant
HARNESS_MIN = 5  # ... once there are at least this many (one early error is not a share)
HARNESS_SHOWN = 5  # first messages kept for the summary


def chunk_seed(seed: int | None, chunk: int) -> int:
    """The seed of chunk ``chunk`` of a campaign seeded ``seed``: a hash of the pair.

    ``seed + chunk`` made ``--seed 2`` replay ``--seed 1``'s chunks shifted by one; a hash makes
    every (seed, chunk) pair its own stream.
    """
    digest = hashlib.blake2b(f"{seed or 0}:{chunk}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


@dataclass
class Found:
    variant: str
    category: str
    property: str
    length: int
    verdict: str
    corpus: str  # "" when the failure never came back on replay (not kept)
    report: str
    reproduced: Rate | None = None  # came back in k of n replays; None: every time
    note: str = ""  # e.g. "shrink cut short (time limit): the best trace so far"
    # Whose defect (docs/semantics.md, "Whose defect"): "framework", "caller" for a D on state
    # the framework leaves to the caller, or "store" for a finding on a store under test
    # (``--store``) that the framework's own store does not show (``fuzz/baseline.py``).
    owner: str = "framework"
    # The fingerprint of the corpus entry that already shows this defect the same way
    # (``corpus.known``): nothing was written, ``corpus`` and ``report`` are that entry's.
    known: str | None = None
    why_owner: str = ""  # how the owner was decided (the built-in comparison), for the summary

    def to_json(self) -> dict:
        doc = dict(self.__dict__)
        if self.reproduced is not None:
            doc["reproduced"] = self.reproduced.to_json()
        return doc


@dataclass
class VariantResult:
    variant: str
    examples: int = 0
    operations: int = 0
    seconds: float = 0.0
    findings: list = field(default_factory=list)
    flaky: list = field(default_factory=list)  # failures Hypothesis could not reproduce
    errors: list = field(default_factory=list)  # engine or adapter errors that ended the run
    # Examples discarded because the adapter failed (fuzz.errors.HarnessFailure), and the first
    # few messages: tool errors, never findings.
    harness_errors: int = 0
    harness_messages: list = field(default_factory=list)
    # Findings whose checked script the adapter's generator failed to write (it raised): a tool
    # error too; the finding is kept, its report has the older script and says why.
    script_errors: list = field(default_factory=list)

    def harness_share_exceeded(self, minimum: int = 1) -> bool:
        return (self.harness_errors >= minimum
                and self.harness_errors > HARNESS_SHARE * max(1, self.examples))
    # evidence.Exercise: per property, the operations that could have broken it (fuzz.evidence)
    exercised: object = field(default_factory=evidence.Exercise)
    stopped: str | None = None  # "time limit", "example budget", "SIGINT", "SIGTERM"
    # Where the variant declares reuse_worker: workers that exited after a case instead of
    # serving the next, because the case left a thread or a file alive (``Session.left_behind``),
    # and what the last one left.  Not an error: the next case got a fresh worker.
    not_reused: int = 0
    left_alive: str = ""


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
    # ``--weight``: generator weights over the variants' ``Tuning.weights`` (what is drawn).
    weights: dict = field(default_factory=dict)
    # Under ``--store``: replay each finding on the framework's own store to tell whose it is
    # (``fuzz/baseline.py``).  False only for tests of the machinery.
    baseline: bool = True


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

    def harness_failed(exc: HarnessFailure) -> None:
        # The adapter failed on this example: discard it (never a finding) and count it; too
        # many end the variant as an engine error would.
        result.harness_errors += 1
        if len(result.harness_messages) < HARNESS_SHOWN:
            example = exc.example()
            result.harness_messages.append(str(exc).splitlines()[0]
                                           + (f"; its example: {example}" if example else ""))
        if result.harness_share_exceeded(HARNESS_MIN):
            raise _TooManyHarnessErrors(_too_many(result)) from exc
        discard_example()

    session.on_harness_failure = harness_failed

    def notify(event, **data):
        if event == "example":
            if cap is not None and result.examples >= cap:
                raise OutOfExamples()
            result.examples += 1
            result.exercised.example(data.get("workflow"))
        elif event == "op":
            result.operations += 1
            result.exercised.op(**data)
        notify_outer(event, variant=variant.name, result=result, **data)

    try:
        _search(adapter, variant, options, session, result, notify, notify_outer, max_examples,
                max_time, started)
    finally:
        session.close()
        result.not_reused, result.left_alive = session.left_behind, session.last_left
    result.seconds = round(time.monotonic() - started, 2)
    return result


def _search(adapter, variant, options, session, result, notify, notify_outer, max_examples,
            max_time, started):
    budget = max_examples or profile_settings(options.profile).max_examples
    found: set = set()
    run = 0
    while True:
        best = Best()
        machine = watched(machine_for(session, observer=notify, suppress=frozenset(found),
                                       weights=options.weights), best)
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
            machine._hypothesis_internal_use_seed = chunk_seed(options.seed, run)
        else:
            overrides["max_examples"] = budget
            if options.seed is not None:
                overrides["derandomize"] = False
                machine._hypothesis_internal_use_seed = chunk_seed(options.seed, run)
        before = result.examples
        failure = stopped = None
        try:
            run_state_machine_as_test(machine, settings=profile_settings(
                options.profile, key=database_key(adapter.name, variant.name, found),
                **overrides))
        except Failure as exc:
            failure = exc
        except Flaky as exc:  # FlakyFailure too: see fuzz/internal/flaky.py
            failure = kept_failure(exc, best)
            if failure is None:
                result.flaky.append(str(exc).splitlines()[0])
        except _TooManyHarnessErrors as exc:
            result.errors.append(str(exc))
            break
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
                _keep(adapter, variant, failure, options, result, notify_outer,
                      _minimizer(session, options, options.deadline))
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
    if result.harness_share_exceeded() and not result.errors:
        result.errors.append(_too_many(result))


def stop_reason(exc: CampaignStopped) -> str:
    if isinstance(exc, Interrupted):
        return signal.Signals(exc.signum).name
    if isinstance(exc, OutOfTime):
        return "time limit"
    if isinstance(exc, OutOfExamples):
        return "example budget"
    return type(exc).__name__


class _TooManyHarnessErrors(BaseException):
    """Ends a variant's Hypothesis run at once.  A ``BaseException``: Hypothesis would shrink
    (and call flaky) an ``Exception``, and this is no failure of an example."""


def _too_many(result) -> str:
    return (f"harness errors in {result.harness_errors} of {result.examples} examples (more "
            f"than {HARNESS_SHARE:.0%}); first: {result.harness_messages[0]}")




def discard_example() -> None:
    """Discard the example a harness failure spoiled.  Inside Hypothesis that is ``reject()``;
    outside it (the minimizer's candidates) the ``HarnessFailure`` itself goes on to the caller,
    which drops that candidate: a ``reject()`` there would end the whole campaign."""
    if currently_in_test_context():
        reject()


def _minimizer(session, options, deadline):
    """The trace-level pass after Hypothesis's shrink (``fuzz.minimize``), within the time box;
    ``None`` when failures are kept as found (``--no-shrink``)."""
    if not (options.shrink and MINIMIZE):
        return None
    from .minimize import minimize, session_judge

    caps = session.adapter.capabilities(session.variant)
    return lambda trace, rate: minimize(trace, session_judge(session), deadline=deadline,
                                        rate=rate, caps=caps)


MINIMIZE = True  # benchmarks switch it off to measure Hypothesis's shrink alone


def _known(trace, options, result, notify, shrunk) -> bool:
    """Report ``trace``'s finding as known, writing nothing, when the corpus has an entry that
    shows the same defect the same way (``corpus.known``): a campaign that finds what the corpus
    has must not pile up new entries and reports for it (issue 42: nine of them in two
    minutes).  The existing entry's owner and report stand."""
    path = corpus.known(trace, options.corpus_dir)
    if path is None:
        return False
    entry = corpus.load_trace(path)
    found = Found(trace.variant, entry.finding.category, entry.finding.property,
                  len(entry.operations), entry.finding.verdict, str(path),
                  str(report.report_path(entry, options.reports_dir)),
                  reproduced=entry.finding.reproduced, owner=entry.finding.owner,
                  known=entry.fingerprint)
    if not any(f.category == found.category for f in result.findings):
        result.findings.append(found)
    notify("finding", variant=trace.variant, result=result, found=found, shrunk=shrunk)
    return True


def _owned(adapter, trace, options):
    """``(trace, why)``: a finding on a store under test replayed on the framework's own store
    to decide whose it is (``fuzz/baseline.py``); any other finding as it is, ``why`` ""."""
    if not options.baseline:
        return trace, ""
    from .baseline import Baseline

    trace, ownership = Baseline(adapter, options.op_timeout, options.deadline).own(trace)
    return trace, ownership.note if ownership is not None else ""


def _keep(adapter, variant, failure, options, result, notify, minimizer=None):
    """Turn a (shrunk) failure into a corpus entry and a shrink report.

    A failure Hypothesis could not reproduce every time is replayed ``TRIALS`` times first: one
    that came back k > 0 times is a finding like any other, kept with its rate (its matrix cell
    reads ``✗ (k/n)``, and its regression test replays it in trials); one that never came back
    is dropped from the corpus, and its report, the only record, says so.
    """
    trace = corpus.entry_from_failure(failure, adapter.name, variant.name, failure.workflow,
                                      dict(adapter.versions()))
    note, stop = "", None
    if getattr(failure, "cut_short", None):
        note = CUT_SHORT_NOTE.format(failure.cut_short)
    shrunk = len(trace.operations)  # Hypothesis's shrink
    if _known(trace, options, result, notify, shrunk):
        return
    timing = getattr(failure, "timing", False)
    try:
        rate = _rate(adapter, trace, options) if timing else None
        if minimizer is not None:
            shorter = minimizer(trace, rate).trace
            if shorter is not trace:  # a new trace: its own rate, measured below
                trace, rate = _witness(trace, rate, shorter,
                                       _rate(adapter, shorter, options) if timing else None)
        if timing:  # the rate is measured once per trace, never twice for the same one
            trace = trace.with_(finding=replace(trace.finding, reproduced=rate))
    except CampaignStopped as exc:  # write the finding first, then stop
        stop = exc
        if timing and trace.finding.reproduced is None:
            trace = _noted(trace, f"{UNMEASURED}: {stop_reason(exc)})")
    except Unmeasured as exc:
        trace = _noted(trace, f"{UNMEASURED}: every replay was a tool error: {exc})")
    if stop is None and _known(trace, options, result, notify, shrunk):
        return  # the minimizer's trace is one the corpus has
    if note:  # after the minimizer, which judges the trace again and writes its own detail
        trace = _noted(trace, note)
    why_owner = ""
    if stop is None and not trace.finding.never_reproduced:
        try:
            trace, why_owner = _owned(adapter, trace, options)
        except CampaignStopped as exc:  # write the finding first (owner undecided), then stop
            stop = exc
    # Signals act only at the runner's checkpoints, never while a finding is written; a finding
    # is shown (notify) only once its files are.
    try:
        path = corpus.entry_path(trace, options.corpus_dir)
        kept = not trace.finding.never_reproduced
        if kept:
            path = corpus.save(trace, options.corpus_dir)
            trace = corpus.load_trace(path)  # an entry found before keeps what it recorded
        # The script is generated, run in fresh interpreters and counted before it is shown.
        try:
            trace, report_file, repro = reprocheck.refresh(adapter, variant, trace, path,
                                                           options.reports_dir,
                                                           op_timeout=options.op_timeout,
                                                           save=kept)
            if repro.error:
                result.script_errors.append(f"{trace.finding.category}: {repro.error} "
                                            f"(report {report_file})")
        except CampaignStopped as exc:
            # Stopped while the script was being checked: the entry is on disk already, so the
            # finding is kept and shown, with a report that has no checked script (regenerate
            # it with `resumefuzz report`).
            stop = stop or exc
            report_file = report.write(trace, path, None, options.reports_dir)
    except OSError as exc:  # checked writable up front, yet it failed: never lose it
        _spill(trace, exc, result)
        if stop is not None:
            raise stop from None
        return
    found = Found(variant.name, trace.finding.category, trace.finding.property,
                  len(trace.operations), trace.finding.verdict,
                  "" if trace.finding.never_reproduced else str(path), str(report_file),
                  reproduced=trace.finding.reproduced, note=note, owner=trace.finding.owner,
                  why_owner=why_owner)
    if trace.finding.never_reproduced:
        result.flaky.append(f"{found.category}: never came back in {TRIALS} replays "
                            f"(not kept; report {report_file})")
    elif not any(f.category == found.category and f.length <= found.length
                 for f in result.findings):
        result.findings = [f for f in result.findings if f.category != found.category] + [found]
    notify("finding", variant=variant.name, result=result, found=found, shrunk=shrunk)
    if stop is not None:
        raise stop


def _witness(trace, rate, shorter, again):
    """``(trace, rate)`` to keep of a finding and the minimizer's ``shorter`` trace (rates
    ``rate`` and ``again``, None when not timing-dependent).  A rare failure can pass the
    minimizer's check once by chance on a trace that hardly ever fails: a shorter trace that
    never came back is no witness, and the one that did come back is kept (a store whose reads
    lag now and then lost every finding this way: issue 42)."""
    if again is not None and again.k == 0 and rate is not None and rate.k > 0:
        return trace, rate
    return shorter, again


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


# The note ``_keep`` puts before a finding's detail when the shrink ran out of time, and the
# pattern that finds it again there (``_noted`` adds the ": ").
CUT_SHORT_NOTE = "shrink cut short ({}): the best trace so far"
CUT_SHORT = re.compile(re.escape(CUT_SHORT_NOTE).replace(r"\{\}", r"[^)]*") + ": ")


def without_cut_short(trace):
    """``trace`` without the "shrink cut short" note ``_keep`` wrote, or None when it has none:
    for ``resumefuzz minimize``, once the trace-level passes reached their fixpoint on it (the
    note warned that the shrink stopped early; that is no longer what the entry is)."""
    match = CUT_SHORT.match(trace.finding.detail)
    if match is None:
        return None
    return trace.with_(finding=replace(trace.finding, detail=trace.finding.detail[match.end():]))


def _rate(adapter, trace, options):
    """How often ``trace`` reproduces over ``TRIALS`` replays."""
    from .replay import Replayer

    # ``store``: the factory this campaign runs on (the adapter has it already).  Without it the
    # replayer refuses an entry of a store, as it must refuse one read from a file, and every
    # timing-dependent finding on a store under test was dropped as "never came back".
    replayer = Replayer(options.op_timeout, adapters={adapter.name: adapter},
                        store=trace.versions.get("store-factory"), deadline=options.deadline)
    results = []
    try:
        for _ in range(TRIALS):
            results.append(replayer.replay_trace(trace))
    except OutOfTime:  # the time box ends the measure: the rate of the trials that ran
        if not results:
            raise
    if all(r.status == "ERROR" for r in results):
        # A tool error is no measure: "never came back" would drop a finding the tool failed
        # to replay.  The finding is kept, unmeasured, and says why.
        raise Unmeasured(results[0].detail)
    return Rate(sum(r.status == "FAILED" for r in results), len(results))


class Unmeasured(Exception):
    """Every replay that was to measure a finding's rate failed as a tool error."""

