"""A campaign: fuzz one target's variants within a budget, and keep what it finds.

``run_campaign`` splits the budget (examples or seconds) evenly over the variants, runs the
differential machine on each, and turns every shrunk failure into a corpus entry and a shrink
report.  A time budget runs the machine in chunks of ``CHUNK`` examples, each with its own seed,
until the time is spent: Hypothesis has no time budget of its own.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from hypothesis import Phase, Verbosity, reject
from hypothesis.errors import Flaky, FlakyFailure
from hypothesis.stateful import run_state_machine_as_test

from adapters.protocol import Adapter, Variant

from . import corpus, evidence, report
from .errors import EngineError, HarnessFailure
from .failures import Failure
from .machine import machine_for
from .profiles import profile_settings
from .runner import Session, Settings

CHUNK = 20
HARNESS_SHARE = 0.2  # harness errors in more than this share of examples end a variant
HARNESS_MIN = 5  # ... once there are at least this many (one early error is not a share)
HARNESS_SHOWN = 5  # first messages kept for the summary


@dataclass
class Found:
    variant: str
    category: str
    property: str
    length: int
    verdict: str
    corpus: str  # "" when the failure never came back on replay (not kept)
    report: str
    reproduced: dict | None = None  # {"k", "n"}: came back in k of n replays; None: every time

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
    # Examples discarded because the adapter failed (fuzz.errors.HarnessFailure), and the first
    # few messages: tool errors, never findings.
    harness_errors: int = 0
    harness_messages: list = field(default_factory=list)

    def harness_share_exceeded(self, minimum: int = 1) -> bool:
        return (self.harness_errors >= minimum
                and self.harness_errors > HARNESS_SHARE * max(1, self.examples))
    # evidence.Exercise: per property, the operations that could have broken it (fuzz.evidence)
    exercised: object = field(default_factory=evidence.Exercise)


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


def run_campaign(adapter: Adapter, variants: list[Variant], options: CampaignOptions,
                 observer=None) -> list[VariantResult]:
    results = []
    share_examples = None
    if options.max_examples is not None:
        share_examples = max(1, options.max_examples // len(variants))
    share_time = options.max_time / len(variants) if options.max_time is not None else None
    if share_examples is None and share_time is None:
        share_examples = None  # the profile's max_examples
    for variant in variants:
        result = fuzz_variant(adapter, variant, options, share_examples, share_time, observer)
        if options.results_dir is not None:
            evidence.record(adapter, variant, result, options.results_dir)
        results.append(result)
    return results


def fuzz_variant(adapter, variant, options, max_examples, max_time, observer=None):
    """Run the machine on one variant until the budget is spent.

    After each failure the machine runs again with that category suppressed, on what is left of
    the budget, so that one frequent category cannot mask the others.
    """
    result = VariantResult(variant.name)
    session = Session(adapter, variant, options.workdir and Path(options.workdir) / variant.name,
                      Settings(op_timeout=options.op_timeout, mode=options.mode))
    notify_outer = observer or (lambda event, **data: None)

    def harness_failed(exc: HarnessFailure) -> None:
        # The adapter failed on this example: discard it (never a finding) and count it; too
        # many end the variant as an engine error would.
        result.harness_errors += 1
        if len(result.harness_messages) < HARNESS_SHOWN:
            result.harness_messages.append(str(exc).splitlines()[0])
        if result.harness_share_exceeded(HARNESS_MIN):
            raise _TooManyHarnessErrors(_too_many(result)) from exc
        reject()

    session.on_harness_failure = harness_failed

    def notify(event, **data):
        if event == "example":
            result.examples += 1
            result.exercised.example()
        elif event == "op":
            result.operations += 1
            result.exercised.op(**data)
        notify_outer(event, variant=variant.name, result=result, **data)

    budget = max_examples or profile_settings(options.profile).max_examples
    found: set = set()
    started = time.monotonic()
    run = 0
    while True:
        machine = machine_for(session, observer=notify, suppress=frozenset(found))
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
        failure = None
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
        except _TooManyHarnessErrors as exc:
            result.errors.append(str(exc))
            break
        except EngineError as exc:
            # The machinery or the adapter broke (never a verdict): this variant's campaign
            # ends here, loudly; the others go on, and the command exits 2.
            result.errors.append(str(exc).splitlines()[0])
            break
        if failure is not None:
            _keep(adapter, variant, failure, options, result, notify_outer)
            found.add(failure.divergence.category)
            if options.stop_on_finding:
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
    result.seconds = round(time.monotonic() - started, 2)
    return result


class _TooManyHarnessErrors(BaseException):
    """Ends a variant's Hypothesis run at once.  A ``BaseException``: Hypothesis would shrink
    (and call flaky) an ``Exception``, and this is no failure of an example."""


def _too_many(result) -> str:
    return (f"harness errors in {result.harness_errors} of {result.examples} examples (more "
            f"than {HARNESS_SHARE:.0%}); first: {result.harness_messages[0]}")


TRIALS = 5  # replays that measure how often a timing-dependent failure reproduces
TRIALS = 5  # replays that measure how often a failure Hypothesis could not reproduce comes back


def _keep(adapter, variant, failure, options, result, notify):
    """Turn a (shrunk) failure into a corpus entry and a shrink report.

    A failure Hypothesis could not reproduce every time is replayed ``TRIALS`` times first: one
    that came back k > 0 times is a finding like any other, kept with its rate (its matrix cell
    reads ``✗ (k/n)``, and its regression test replays it in trials); one that never came back
    is dropped from the corpus, and its report, the only record, says so.
    """
    trace = corpus.entry_from_failure(failure, adapter.name, variant.name, failure.workflow,
                                      dict(adapter.versions()))
    if getattr(failure, "timing", False):
        trace = _measure_timing(adapter, trace, options)
    path = corpus.entry_path(trace, options.corpus_dir)
    if not trace.finding.never_reproduced:
        path = corpus.save(trace, options.corpus_dir)
    script = adapter.repro_script(variant, trace.workflow, trace.operations)
    report_file = report.write(trace, path, script, options.reports_dir)
    found = Found(variant.name, trace.finding.category, trace.finding.property,
                  len(trace.operations), trace.finding.verdict,
                  "" if trace.finding.never_reproduced else str(path), str(report_file),
                  trace.finding.reproduced)
    if trace.finding.never_reproduced:
        result.flaky.append(f"{found.category}: never came back in {TRIALS} replays "
                            f"(not kept; report {report_file})")
    elif not any(f.category == found.category and f.length <= found.length
                 for f in result.findings):
        result.findings = [f for f in result.findings if f.category != found.category] + [found]
    notify("finding", variant=variant.name, result=result, found=found)


def _measure_timing(adapter, trace, options):
    """Replay a failure Hypothesis could not reproduce every time ``TRIALS`` times, and record in
    its finding how often it came back (``reproduced: {"k", "n"}``): a rate, not a verdict."""
    from .replay import Replayer

    replayer = Replayer(options.op_timeout, adapters={adapter.name: adapter})
    statuses = [replayer.replay_trace(trace).status for _ in range(TRIALS)]
    again = sum(s == "FAILED" for s in statuses)
    return trace.with_(finding=replace(trace.finding, reproduced={"k": again, "n": TRIALS}))
