"""The ``resumefuzz`` command line: ``fuzz``, ``replay``, ``minimize``, ``explore`` and ``targets``.

Exit status: 0 nothing found (``fuzz``) / every entry FIXED (``replay``) / every mutant exposed
(``explore``); 1 something found / an entry not FIXED / a mutant not exposed; 2 a usage or
environment error, reported as one line on stderr, with nothing written (every option and output
folder is checked before any work); 130 / 143 stopped by SIGINT / SIGTERM, after writing every
finding made so far.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import tempfile
import time
from pathlib import Path

from adapters.protocol import OPERATIONS
from adapters.storeprotocol import StoreFactoryError

from .errors import Interrupted, ResumefuzzError, UsageError
from .targets import FRAMEWORKS as FRAMEWORK_NAMES

_STARTED = time.monotonic()  # --max-time counts from here: imports and preparation included


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    import signal

    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    if args.func in (_fuzz, _replay, _nightly):  # commands that fork workers and write findings
        from .internal import lifetime

        lifetime.install_stop_handlers()
    try:
        return args.func(args)
    except ResumefuzzError as exc:
        print(f"resumefuzz: error: {exc}", file=sys.stderr)
        return 2
    except StoreFactoryError as exc:  # --store: found when the factory is first probed
        print(f"resumefuzz: error: {exc}", file=sys.stderr)
        return 2
    except (Interrupted, KeyboardInterrupt) as exc:
        signum = getattr(exc, "signum", 2)
        print(f"resumefuzz: stopped by {_signame(signum)}; every finding shown was written",
              file=sys.stderr)
        return 128 + signum
    finally:  # main() called in-process (tests, embedding) leaves the handlers as it found them
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def _signame(signum: int) -> str:
    import signal

    return signal.Signals(signum).name


# -- validation, before any work ------------------------------------------------------------------


def _positive(flag: str, value, integer: bool = False):
    """A finite number above zero, or a ``UsageError`` naming the flag."""
    if value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value) or value <= 0:
        kind = "whole number" if integer else "finite number of seconds"
        raise UsageError(f"{flag} must be a positive {kind}, got {value}")
    return value


def _seed(value):
    if value is not None and not 0 <= value < 2**64:
        raise UsageError(f"--seed must lie in 0..2**64-1, got {value}")
    return value


def _writable(flag: str, value) -> Path:
    """An output folder that exists as a writable folder, or can be made in one: checked by
    creating (and at once removing) a file in it or in its nearest existing ancestor."""
    path = Path(value)
    probe = path
    while not probe.exists() and probe != probe.parent:
        if probe.is_symlink():
            break
        probe = probe.parent
    if not probe.is_dir():
        what = "is not a folder" if probe.exists() or probe.is_symlink() else "cannot be made"
        raise UsageError(f"{flag} {value}: {probe} {what}")
    try:
        tempfile.TemporaryFile(dir=probe).close()
    except OSError as exc:
        raise UsageError(f"{flag} {value}: {probe} is not writable: "
                         f"{exc.strerror or exc}") from None
    return path


class _HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default, unless the text already shows it
    (``%(default)s``): a user should not have to read the source to learn where a command
    writes or how long it waits.  A flag (False) or an option with no default (None) says
    nothing; an empty list reads "none"."""

    def _get_help_string(self, action):
        text = action.help or ""
        if ("%(default)" in text or not action.option_strings
                or action.default in (None, False, argparse.SUPPRESS)):
            return text
        return f"{text} (default: {'none' if action.default == [] else '%(default)s'})"


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)


def _version() -> str:
    """``resumefuzz <version> (hypothesis <version>, Python <version>)``, from the installed
    packages' metadata: what a bug report needs to say which engine found a finding."""
    import platform
    from importlib import metadata

    def of(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:  # run from a checkout that was never installed
            return "unknown"

    return (f"resumefuzz {of('resumefuzz')} (hypothesis {of('hypothesis')}, "
            f"Python {platform.python_version()})")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="resumefuzz",
        description="Differential fuzzing of checkpoint, interrupt and resume semantics.",
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(required=True, metavar="COMMAND", parser_class=_Parser)
    _add_fuzz_command(sub)
    _add_replay_command(sub)
    _add_minimize_command(sub)
    _add_explore_command(sub)
    _add_nightly_command(sub)
    _add_matrix_command(sub)
    _add_defects_command(sub)
    _add_promises_command(sub)
    _add_report_command(sub)
    _add_dedupe_command(sub)
    _add_merge_evidence_command(sub)
    _add_targets_command(sub)
    return parser


def _add_fuzz_command(sub) -> None:
    p = sub.add_parser("fuzz", help="fuzz a target against the reference model")
    p.add_argument("target", help="reference, mutant:<Category>, a framework name, or mod:Class")
    p.add_argument("--variant", action="append", metavar="V",
                   help="fuzz only this variant (repeatable; default: every variant in turn)")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--max-examples", type=int, metavar="N",
                        help="examples generated in total, shared exactly by the variants; "
                             "database replays and shrinking come on top, capped at 10N+100 per "
                             "variant (default: the profile's count per variant)")
    budget.add_argument("--max-time", type=float, metavar="S",
                        help="wall-clock seconds for the whole command, shared by the variants; "
                             "a shrink cut short keeps its best trace so far")
    p.add_argument("--seed", type=int, help="seed the example generation (reproducible runs)")
    p.add_argument("--profile", choices=("dev", "ci", "nightly"),
                   help="settings profile (default: $RESUMEFUZZ_PROFILE, else ci under CI, else dev)")
    p.add_argument("--op-timeout", type=float, default=30.0, metavar="S",
                   help="seconds an operation may take before it counts as stuck")
    p.add_argument("--corpus", default="corpus", metavar="DIR", help="corpus directory")
    p.add_argument("--reports", default="shrink_reports", metavar="DIR", help="reports directory")
    # Opt-in: a campaign someone runs to look (a quickstart, a store author's try) must not
    # rewrite the tracked evidence; `nightly`, whose job it is, records by default.
    p.add_argument("--results", metavar="DIR",
                   help="record campaign evidence for the matrix here (results/ for the "
                        "project's own); not written unless given")
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    p.add_argument("--no-shrink", action="store_true",
                   help="keep failures as found, unshrunk (quick smoke runs)")
    p.add_argument("--exit-zero", action="store_true",
                   help="exit 0 even when something was found (campaign jobs that collect "
                        "findings); usage and environment errors still exit 2")
    p.add_argument("--store", metavar="MOD:FUNC",
                   help="bring your own store: the factory mypkg.mod:function that builds the "
                        "store (docs/stores.md); each finding is replayed on the framework's "
                        "own store to tell the store's from the framework's")
    p.add_argument("--include-framework", action="store_true",
                   help="with --store: let the framework's own findings (shown on its "
                        "built-in store too) and its documented weakenings (D) count in the "
                        "exit status; by default only the store's do")
    p.add_argument("--weight", action="append", metavar="KEY=N", default=[],
                   help="draw KEY N times as often (repeatable): op:stale_resume, "
                        "kind:<exception|sigkill>, phase:<crash phase>; overrides the variant's "
                        "own weights, never changes what is allowed")
    p.set_defaults(func=_fuzz)


def _add_replay_command(sub) -> None:
    p = sub.add_parser("replay", help="replay corpus entries: FIXED / FAILED / CHANGED / ERROR")
    p.add_argument("paths", nargs="*", metavar="PATH", help="entries or directories (default: corpus/)")
    p.add_argument("--target", help="replay on this target instead of each entry's own")
    p.add_argument("--trials", type=int, default=1, metavar="N",
                   help="replay each entry N times and report how often each status came up")
    p.add_argument("--mark-timing", action="store_true",
                   help="with --trials: record in each entry whose recorded status came up in "
                        "some but not all trials the measured rate (finding.reproduced); an "
                        "entry that already has a rate gets the two pooled (k and n summed)")
    p.add_argument("--update", action="store_true",
                   help="record in each entry the status this replay found (FIXED, FAILED, "
                        "CHANGED), and the verdict (✗ or D) of a finding that came back, as the "
                        "nightly run does; ERROR, or a CHANGED at an earlier step than the "
                        "recorded finding (it never got there), leaves an entry as it was")
    p.add_argument("--relabel", action="store_true",
                   help="rewrite each entry that came back CHANGED under the category found now "
                        "(the most frequent among its trials, with its rate when not every trial "
                        "showed it): new finding, trace cut at that step, new file name; the old "
                        "entry and its report are removed (write the new report with `report`)")
    p.add_argument("--retire", action="store_true",
                   help="remove each entry (and its report) that has an operation its variant "
                        "now declares n/a: it judged what the framework does not offer (no "
                        "state schema to validate, no integrity protection, an idiom it lacks); "
                        "the reason is printed; every other entry is left as it is")
    p.add_argument("--collect-garbage", action="store_true",
                   help="run a full garbage collection in the worker before each operation: a "
                        "finding that shows only when a collection comes at the wrong moment "
                        "(an object the framework holds only weakly) then no longer waits for a "
                        "process whose history collects at that moment; "
                        "not with --mark-timing, --update or --relabel: what an entry records is "
                        "of replays as campaigns run them")
    p.add_argument("--op-timeout", type=float, default=30.0, metavar="S",
                   help="seconds an operation may take before it counts as stuck")
    p.add_argument("--json", action="store_true", help="print a JSON list on stdout")
    p.add_argument("--store", metavar="MOD:FUNC",
                   help="the store factory of entries fuzzed with --store (never read from an entry)")
    p.set_defaults(func=_replay)


def _add_minimize_command(sub) -> None:
    p = sub.add_parser("minimize", help="minimize corpus entries again on their targets")
    p.add_argument("paths", nargs="+", metavar="PATH", help="entries or directories")
    p.add_argument("--max-time", type=float, metavar="S",
                   help="stop minimizing an entry after S seconds (keep the best so far)")
    p.add_argument("--replace", action="store_true",
                   help="remove an entry (and its report) that a shorter one replaces")
    p.add_argument("--op-timeout", type=float, default=30.0, metavar="S",
                   help="seconds an operation may take before it counts as stuck")
    p.add_argument("--corpus", default="corpus", metavar="DIR", help="write new entries here")
    p.add_argument("--reports", default="shrink_reports", metavar="DIR", help="reports directory")
    p.add_argument("--verify", type=int, default=3, metavar="N",
                   help="run each new entry's reproduction script N times in a fresh interpreter "
                        "(default %(default)s, as a campaign does; 0: generate only)")
    p.add_argument("--store", metavar="MOD:FUNC",
                   help="the store factory of entries fuzzed with --store (never read from an "
                        "entry); entries of other factories are left out, and counted")
    p.add_argument("--json", action="store_true", help="print a JSON list on stdout")
    p.set_defaults(func=_minimize)


def _add_explore_command(sub) -> None:
    p = sub.add_parser("explore", help="enumerate operation sequences on the reference and mutants")
    p.add_argument("--n", type=int, default=3, help="tasks in the workflow")
    p.add_argument("--gates", default="2", help="comma-separated gated tasks")
    p.add_argument("--values", default="a,b", help="comma-separated resume values")
    p.add_argument("--depth", type=int, default=3, help="operations per sequence")
    p.add_argument("--target", help="only the operations this target can express (its capabilities)")
    p.add_argument("--variant", help="the target's variant (needed when it has several)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=_explore)


def _add_nightly_command(sub) -> None:
    p = sub.add_parser("nightly", help="campaigns on every installed target, replay, matrix")
    p.add_argument("--targets", nargs="+", metavar="T",
                   help="targets (default: reference and every installed framework adapter)")
    p.add_argument("--per-campaign", type=float, default=600.0, metavar="S",
                   help="seconds per target-variant campaign, at most")
    p.add_argument("--total", type=float, default=3600.0, metavar="S",
                   help="seconds for all campaigns together")
    p.add_argument("--max-examples", type=int, metavar="N",
                   help="a fixed example budget per campaign instead of a time budget")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="campaigns run at once")
    p.add_argument("--seed", type=int, help="seed the example generation (reproducible runs)")
    p.add_argument("--profile", choices=("dev", "ci", "nightly"), default="nightly",
                   help="settings profile of the campaigns")
    p.add_argument("--op-timeout", type=float, default=60.0, metavar="S",
                   help="seconds an operation may take before it counts as stuck")
    p.add_argument("--corpus", default="corpus", metavar="DIR", help="corpus directory")
    p.add_argument("--reports", default="shrink_reports", metavar="DIR", help="reports directory")
    p.add_argument("--results", default="results", metavar="DIR",
                   help="evidence directory (the matrix is written there too, as matrix.md "
                        "and matrix.html)")
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    p.set_defaults(func=_nightly)


def _add_matrix_command(sub) -> None:
    p = sub.add_parser("matrix", help="render the conformance matrix from evidence and corpus")
    p.add_argument("targets", nargs="*", metavar="TARGET", help="only these targets")
    p.add_argument("--format", choices=("md", "html", "json"), default="md",
                   help="output format")
    p.add_argument("--results", default="results", metavar="DIR", help="evidence directory")
    p.add_argument("--corpus", default="corpus", metavar="DIR", help="corpus directory")
    p.add_argument("--reports", default="shrink_reports", metavar="DIR",
                   help="reports directory (the cells link to them)")
    p.add_argument("--output", metavar="FILE", help="write here (links made relative to it)")
    p.set_defaults(func=_matrix)


def _add_defects_command(sub) -> None:
    p = sub.add_parser("defects", help="the defect ledger: distinct defects per framework")
    p.add_argument("--framework", action="append", metavar="T",
                   help="only this target (repeatable; default: every target in the corpus)")
    p.add_argument("--json", action="store_true", help="print the ledger as JSON")
    p.add_argument("--corpus", default="corpus", metavar="DIR", help="corpus directory")
    p.add_argument("--reports", default="shrink_reports", metavar="DIR",
                   help="reports directory")
    p.add_argument("--upstream", default="results/upstream.json", metavar="FILE",
                   help="a maintainer's {defect id: link}")
    p.add_argument("--output", metavar="FILE",
                   help="write here (results/defects.md is the committed one)")
    p.set_defaults(func=_defects)


def _add_promises_command(sub) -> None:
    p = sub.add_parser("promises", help="what a framework promises, property by property")
    p.add_argument("framework", choices=sorted(FRAMEWORK_NAMES), help="the framework target")
    p.add_argument("--format", choices=("text", "md", "json"), default="text",
                   help="md: the table docs/frameworks/<fw>.md carries")
    p.set_defaults(func=_promises)


def _add_targets_command(sub) -> None:
    p = sub.add_parser("targets", help="list targets, or one target's variants and capabilities")
    p.add_argument("target", nargs="?",
                   help="a target to describe (default: list the targets)")
    p.add_argument("--json", action="store_true", help="print the variants as JSON")
    p.add_argument("--store", metavar="MOD:FUNC", help="list the variants of this store factory")
    p.set_defaults(func=_targets)


# -- fuzz ---------------------------------------------------------------------------------------


WEIGHT_AXES = {"op": ("stale_resume",), "kind": ("exception", "sigkill"),
               "phase": ("before_effect", "in_flight", "after_commit")}


def _weights(items) -> dict:
    """``--weight KEY=N`` items as ``Tuning.weights`` (one-line ``UsageError`` if bad)."""
    out = {}
    for item in items:
        key, _, number = item.partition("=")
        axis, _, option = key.partition(":")
        if option not in WEIGHT_AXES.get(axis, ()):
            known = ", ".join(f"{a}:{o}" for a, opts in WEIGHT_AXES.items() for o in opts)
            raise UsageError(f"--weight {item}: unknown key {key!r}; expected one of {known}")
        try:
            value = float(number)
        except ValueError:
            value = 0.0
        if not value >= 1:
            raise UsageError(f"--weight {item}: N must be a number >= 1")
        out[key] = value
    return out


def _fuzz(args) -> int:
    from .campaign import CampaignOptions, run_campaign
    from .corpus import read_entries
    from .corpus import slug as corpus_slug
    from .internal import lifetime
    from .profiles import profile_settings
    from .targets import prepare_store, resolve, select_variants, use_store

    _positive("--max-examples", args.max_examples, integer=True)
    _positive("--max-time", args.max_time)
    _positive("--op-timeout", args.op_timeout)
    _seed(args.seed)
    if args.include_framework and not args.store:
        raise UsageError("--include-framework needs --store: without a store under test every "
                         "finding is the framework's and counts already")
    outputs = [_writable(f, v) for f, v in (("--corpus", args.corpus),
                                             ("--reports", args.reports))]
    outputs.append(None if args.results is None else _writable("--results", args.results))
    profile_settings(args.profile)  # validates the profile before anything runs
    deadline = None if args.max_time is None else _STARTED + args.max_time
    adapter = resolve(args.target)
    use_store(adapter, args.store)
    variants = select_variants(adapter, args.variant)  # an unknown variant fails before import
    # The entries a finding is compared with (known or new): a file there that is no trace is
    # one line and exit 2 now, as in every command that reads the corpus, not a surprise later.
    own = Path(args.corpus) / corpus_slug(adapter.name)
    if own.is_dir():
        read_entries([own], required=False)
    if args.max_examples is not None and args.max_examples < len(variants):
        raise UsageError(f"--max-examples {args.max_examples} is fewer than the {len(variants)} "
                         "variants selected (each needs at least one example)")
    prepare_store(adapter)
    if args.store:
        _store_banner(adapter, variants, sys.stderr if args.json else sys.stdout)
    options = CampaignOptions(args.max_examples, args.max_time, args.seed, args.profile,
                              args.op_timeout, *outputs, shrink=not args.no_shrink,
                              deadline=deadline, weights=_weights(args.weight))
    started = time.monotonic()
    with _Display(args.target, quiet=False, to_stderr=args.json) as display:
        results = run_campaign(adapter, variants, options, observer=display.update)
    seconds = round(time.monotonic() - started, 2)
    stopped = lifetime.stop_signal()
    findings = [f.to_json() for r in results for f in r.findings]
    # The variants the time box (or a signal) ended the campaign before: a user who reads
    # "nothing found" must know which variants were never tried.
    ran = {r.variant for r in results}
    unreached = [v.name for v in variants if v.name not in ran]
    counted = [f for f in findings if _counts(f, args)]
    if args.json:
        print(json.dumps({
            "target": args.target,
            "variants": [r.variant for r in results],
            "not_reached": unreached,
            "counted": len(counted),
            "examples": sum(r.examples for r in results),
            "operations": sum(r.operations for r in results),
            "seconds": seconds,
            "findings": findings,
            "flaky": [m for r in results for m in r.flaky],
            "errors": [{"variant": r.variant, "error": e} for r in results for e in r.errors],
            "harness_errors": [{"variant": r.variant, "count": r.harness_errors,
                                "first": r.harness_messages} for r in results],
            "script_errors": [{"variant": r.variant, "error": e}
                              for r in results for e in r.script_errors],
            "stopped": {r.variant: r.stopped for r in results if r.stopped},
            "not_reused": [{"variant": r.variant, "count": r.not_reused, "last": r.left_alive}
                           for r in results if r.not_reused],
        }, indent=2, ensure_ascii=False))
    else:
        _summary(args.target, results, seconds, unreached, bool(args.store),
                 sum(f["owner"] == "store" for f in findings))
    if any(r.errors for r in results):
        for r in results:
            for e in r.errors:
                print(f"resumefuzz: error: [{r.variant}] {e}", file=sys.stderr)
        return 2
    if stopped:
        print(f"resumefuzz: stopped by {_signame(stopped)}; every finding shown was written",
              file=sys.stderr)
        return 128 + stopped
    return 1 if counted and not args.exit_zero else 0


def _counts(found: dict, args) -> bool:
    """Whether a finding counts in the exit status.  On a store under test (``--store``) only
    the store's own do, unless ``--include-framework``: a correct saver must exit 0 although
    the framework under it has defects of its own (``fuzz/baseline.py``)."""
    if not args.store or args.include_framework:
        return True
    return found["owner"] == "store"


class _Display:
    """Progress, one line per variant.  On a terminal a rich display, refreshed by hand (rich's
    auto-refresh runs a thread, and a parent with threads must not fork workers).  Elsewhere
    (CI logs, tox, a pipe) plain lines, never cut to a width: a line when a variant starts, one
    per finding, and one every ``PLAIN_EVERY`` seconds; each names its variant."""

    PLAIN_EVERY = 30.0

    def __init__(self, target: str, quiet: bool, to_stderr: bool):
        from rich.console import Console

        self.console = Console(stderr=to_stderr)
        self.stream = sys.stderr if to_stderr else sys.stdout
        self.plain = not self.console.is_terminal
        self.progress = None
        if not self.plain:
            from rich.progress import Progress, TextColumn, TimeElapsedColumn

            # markup=False: "[variant]" is text, not a rich style tag (which ate the variant's
            # name from every line).
            self.progress = Progress(TextColumn("{task.description}", markup=False),
                                     TimeElapsedColumn(), console=self.console,
                                     auto_refresh=False, transient=False)
        self.tasks: dict = {}
        self.target = target
        self._last = 0.0

    def __enter__(self):
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc):
        if self.progress is not None:
            self.progress.refresh()
            self.progress.stop()

    def line(self, variant, result) -> str:
        cats = ", ".join(sorted({f.category for f in result.findings})) or "none"
        return (f"{self.target} [{variant}]  examples {result.examples}  ops {result.operations}"
                f"  findings: {cats}")

    def update(self, event, variant=None, result=None, **data):
        now = time.monotonic()
        if self.plain:
            if variant not in self.tasks:
                self.tasks[variant] = self._last = now
                print(f"{self.target} [{variant}] started", file=self.stream, flush=True)
            if event == "finding":
                found = data.get("found")
                known = f", known {found.category}-{found.known}" if found and found.known else ""
                what = f"{found.category} ({found.property}){known}" if found else ""
                print(f"{self.target} [{variant}] finding: {what}", file=self.stream, flush=True)
            elif now - self._last > self.PLAIN_EVERY:
                self._last = now
                print(self.line(variant, result), file=self.stream, flush=True)
            return
        if variant not in self.tasks:
            self.tasks[variant] = self.progress.add_task(variant)
        self.progress.update(self.tasks[variant], description=self.line(variant, result))
        if event == "finding" or now - self._last > 0.2:
            self._last = now
            self.progress.refresh()


def _summary(target, results, seconds, unreached=(), store=False, counted=0) -> None:
    print(f"\n{target}: {sum(r.examples for r in results)} examples, "
          f"{sum(r.operations for r in results)} operations in {seconds}s")
    for r in results:
        if not r.findings:
            print(f"  [{r.variant}] nothing found ({r.examples} examples, {r.operations} ops)")
        for f in r.findings:
            mark = "D" if f.verdict == "D" else "✗"
            if f.reproduced and not f.reproduced.always:
                mark += f" ({f.reproduced})"  # came back k of n times
            note = f" [{f.note}]" if f.note else ""
            known = f", known {f.category}-{f.known} (nothing written)" if f.known else ""
            # Under --store every finding says whose it is: the store author acts on theirs.
            whose = ""
            if store:
                whose = f", {_WHOSE.get(f.owner, f.owner)}" + (f" ({f.why_owner})"
                                                              if f.why_owner else "")
            # The report's path comes last, after ": ", on every line (scripts read it there).
            print(f"  [{r.variant}] {mark} {f.category} ({f.property}), {f.length} ops"
                  f"{known}{whose}: {f.report}{note}")
        if r.stopped in ("SIGINT", "SIGTERM"):
            print(f"  [{r.variant}] stopped early by {r.stopped}")
        for m in r.flaky:
            print(f"  [{r.variant}] flaky (not reproducible): {m}")
        if r.harness_errors:
            print(f"  [{r.variant}] {r.harness_errors} examples discarded on harness errors "
                  f"(tool errors, not findings); first: {'; '.join(r.harness_messages)}")
        if r.not_reused:
            print(f"  [{r.variant}] {r.not_reused} workers not reused: their case left "
                  f"something alive (last: {r.left_alive}); each next case got a fresh worker")
        for m in r.script_errors:
            print(f"  [{r.variant}] script generator failed (a tool error; the report has no "
                  f"checked script): {m}")
    if store:
        print(f"  the store's findings: {counted}; the framework's own, listed above, count in "
              "the exit status only with --include-framework")
    if unreached:
        print(f"  not reached ({len(unreached)} of {len(unreached) + len(results)} variants; "
              f"the time box or a signal ended the campaign first): {', '.join(unreached)}")


_WHOSE = {"store": "the store's", "framework": "the framework's", "caller": "the caller's"}


# -- bring your own store (--store) ------------------------------------------------------------


def _store_banner(adapter, variants, out) -> None:
    """Say loudly, before anything runs, which store runs and what is n/a on it."""
    versions = adapter.versions()
    print(f"store: {versions.get('store-factory')}", file=out)
    for v in variants:
        caps = adapter.capabilities(v)
        print(f"  [{v.name}] {v.description}", file=out)
        for op, why in sorted(caps.not_expressible.items()):
            print(f"  [{v.name}] n/a {op}: {why}", file=out)


# -- replay -------------------------------------------------------------------------------------


def _replay(args) -> int:
    from .corpus import read_entries
    from .replay import Replayer

    _positive("--trials", args.trials, integer=True)
    _positive("--op-timeout", args.op_timeout)
    writes = [f for f, on in (("--mark-timing", args.mark_timing), ("--update", args.update),
                              ("--relabel", args.relabel), ("--retire", args.retire)) if on]
    if args.collect_garbage and writes:
        raise UsageError(f"--collect-garbage with {writes[0]}: what an entry records is of "
                         "replays as a campaign runs them, without the forced collections")
    # Every entry is read before the first replay: a bad file is one line and exit 2, not an
    # ERROR row after an hour of replays (nor a traceback for a binary file).
    paths = [path for path, _ in read_entries(args.paths or None)]
    replayer = Replayer(args.op_timeout, args.target, store=args.store,
                        collect_garbage=args.collect_garbage)
    results = []
    try:
        _replay_all(args, paths, replayer, results)
    except Interrupted as exc:
        stopped = exc.signum
    else:
        stopped = None
    _print_replays(args, results)
    if stopped:
        print(f"resumefuzz: stopped by {_signame(stopped)} after {len(results)} of {len(paths)} "
              "entries", file=sys.stderr)
        return 128 + stopped
    return 0 if all(r.status == "FIXED" for r in results) else 1


def _replay_all(args, paths, replayer, results) -> None:
    from .corpus import replays_for
    from .replay import reached, summarize
    from .trace import load_trace

    for path in paths:
        # A status written into the entry is judged by as many replays as the nightly run and
        # the regression test give it (``corpus.replays_for``, at its recorded rate): one replay
        # of a finding that comes back 6 times in 14 would otherwise write FIXED by chance.
        count = max(args.trials, replays_for(load_trace(path))) if args.update else args.trials
        trials = [replayer.replay(path) for _ in range(count)]
        statuses = [t.status for t in trials]
        result = summarize(trials)  # FAILED if any trial failed; the rate of each status
        if count > 1 and args.mark_timing:
            _mark_timing(path, statuses)
        if args.update:  # only from trials that reached the finding (``replay.reached``)
            entry = load_trace(path)
            reaching = [t for t in trials if reached(entry, t.status, t.step)]
            if reaching:
                _record_status(path, reaching)
        if args.relabel:
            _relabel(path, trials, result)
        if args.retire and result.status == "ERROR" and result.na:
            _retire(path, result)
        results.append(result)


def _retire(path, result) -> None:
    """``replay --retire``: remove an entry whose variant now declares one of its operations
    n/a, and its report.  Recorded before the declaration, it accuses the framework of
    breaking a mechanism it does not offer (docs/contract.md §5: no mechanism, no ✗)."""
    from . import report
    from .trace import load_trace

    trace = load_trace(path)
    Path(path).unlink()
    if trace.finding is not None:
        report.report_path(trace).unlink(missing_ok=True)
    result.detail += " => retired (entry and report removed)"


def _relabel(path, trials, result) -> None:
    """``replay --relabel``: write the entry again under the category its replays found now
    (``replay.relabelled``), remove the old entry and its report, and say where it went."""
    from . import report
    from .corpus import entry_path
    from .replay import relabelled
    from .trace import dump_trace, load_trace

    old = load_trace(path)
    new = relabelled(old, trials)
    if new is None:
        return
    root = Path(path).parents[2]  # corpus/<target>/<variant>/<entry>.json
    written = entry_path(new, root)
    # The same witness may be in the corpus already (the cut trace is an entry of its own): it
    # is kept as it is, with its checked script and its date, and only the old entry goes.
    moved = written.resolve() != Path(path).resolve()
    there = moved and written.exists()
    if not there:
        dump_trace(new, written)
    if moved:
        Path(path).unlink()
        if old.finding is not None:
            report.report_path(old).unlink(missing_ok=True)
    result.detail += (f" => relabelled {new.finding.category}: {written}"
                      + (" (already in the corpus, kept as it was)" if there else ""))


def _print_replays(args, results) -> None:
    if args.json:
        print(json.dumps([r.to_json() for r in results], indent=2))
    else:
        marks = {"FIXED": "+", "FAILED": "x", "CHANGED": "~", "ERROR": "!"}
        for r in results:
            print(f"{marks[r.status]} {r.status:7} {r.path}: {r.detail}")
        counts = {s: sum(r.status == s for r in results) for s in marks}
        print(", ".join(f"{n} {s.lower()}" for s, n in counts.items()))


def _record_status(path, trials) -> None:
    """Write what the replay ``trials`` found into the entry: its status and the verdict of a
    finding that came back (``replay.updated``).  The report says the old verdict until
    ``resumefuzz report`` writes it again."""
    from .replay import updated
    from .trace import dump_trace, load_trace

    trace = load_trace(path)
    new = updated(trace, trials)
    if new is not trace:
        dump_trace(new, path)


def _mark_timing(path, statuses) -> None:
    """Record, in the entry's finding, the rate at which its finding came back
    (``reproduced``), pooled with the rate it already has: the regression test then
    replays it in trials.  An entry without a rate that came back every time, or never, is left
    as it is (``--update`` records the latter)."""
    from .rate import Rate
    from .trace import dump_trace, load_trace

    trace = load_trace(path)
    recorded = trace.status or "FAILED"
    # The rate is the finding's, whatever the entry's status: a FIXED entry's ``reproduced`` says
    # how often its finding still came back (the fix's rate is (n - k) / n, README "Tests and
    # environments"), so its FAILED trials are the ones counted.
    again = statuses.count("FAILED" if recorded == "FIXED" else recorded)
    if trace.finding is None:
        return
    before = trace.finding.reproduced
    if before is not None:
        # Pooled with what was measured before: a rate from a few replays on a loaded machine
        # (5 of 6, say) is no better an estimate than this one, and the regression test sizes
        # its trials by the rate; 0 of N now still counts (the entry stays as timing-dependent).
        rate = before.pooled(Rate(again, len(statuses)))
    elif 0 < again < len(statuses):
        rate = Rate(again, len(statuses))
    else:
        return
    finding = dataclasses.replace(trace.finding, reproduced=rate)
    dump_trace(trace.with_(finding=finding), path)


# -- minimize -----------------------------------------------------------------------------------


def _minimize(args) -> int:
    from pathlib import Path

    from . import corpus, report, reprocheck
    from .campaign import without_cut_short
    from .minimize import measure, minimize, session_judge, timing_dependent
    from .rate import TRIALS
    from .runner import Session, Settings
    from .targets import prepare_store, resolve_registered, select_variants, use_store
    from .trace import dump_trace

    _positive("--max-time", args.max_time)
    _positive("--op-timeout", args.op_timeout)
    if args.verify < 0:
        raise UsageError("--verify must be 0 or more")
    traces = corpus.read_entries(args.paths, required=False)  # a bad file stops us before any run
    paths = [path for path, _ in traces]
    unfound = [str(p) for p, t in traces if t.finding is None]
    if not paths or unfound:
        raise UsageError(f"nothing to minimize: {', '.join(unfound) or ' '.join(args.paths)}"
                         + (" has no finding" if unfound else " holds no entries"))
    # An entry fuzzed on a custom store runs only on that factory, which only the command line
    # names (a corpus file is inert data): a directory of several stores takes one run each.
    other: dict = {}
    for path, trace in traces:
        factory = trace.versions.get("store-factory")
        if factory != args.store:
            other[factory] = other.get(factory, 0) + 1
    traces = [(p, t) for p, t in traces if t.versions.get("store-factory") == args.store]
    # An entry recorded FIXED no longer diverges: no candidate could keep its finding, so it is
    # left as the record it is (and counted) instead of being judged in vain.
    fixed = sum(t.status == "FIXED" for _, t in traces)
    traces = [(p, t) for p, t in traces if t.status != "FIXED"]
    if fixed:
        print(f"minimize: left out {fixed} entries recorded FIXED (nothing diverges to keep)",
              file=sys.stderr)
    for factory, count in other.items():
        print(f"minimize: left out {count} entries fuzzed on "
              + (f"the store factory {factory} (run again with --store {factory})" if factory
                 else "the variants' own stores (run again without --store)"), file=sys.stderr)
    if not traces:
        where = args.store or "the variants' own stores"
        raise UsageError(f"nothing to minimize: no entry under {' '.join(args.paths)} ran on "
                         f"{where}")
    adapters, sessions, out = {}, {}, []
    for path, trace in traces:
        if trace.target not in adapters:
            # A target named by a file must be a registered one: a file never names code to run.
            adapter = resolve_registered(trace.target)
            use_store(adapter, args.store)
            adapters[trace.target] = prepare_store(adapter)
        adapter = adapters[trace.target]
        if (trace.target, trace.variant) not in sessions:
            (variant,) = select_variants(adapter, [trace.variant])
            sessions[trace.target, trace.variant] = Session(
                adapter, variant, settings=Settings(op_timeout=args.op_timeout))
        session = sessions[trace.target, trace.variant]
        judge = session_judge(session)
        deadline = time.monotonic() + args.max_time if args.max_time else None
        result = minimize(trace, judge, deadline=deadline, rate=_recorded_rate(trace),
                          caps=adapter.capabilities(session.variant))
        new = result.trace
        if new is not trace and timing_dependent(trace):
            goal = (new.finding.category, new.finding.property, new.finding.verdict)
            rate = measure(judge, new, goal, TRIALS)
            new = new.with_(finding=dataclasses.replace(new.finding, reproduced=rate))
        written = str(path)
        if new is trace and result.stopped == "fixpoint" and (
                unnoted := without_cut_short(trace)) is not None:
            # The campaign's shrink was cut short, and the passes found nothing shorter: the
            # entry is as short as they make it, and stops saying otherwise (same fingerprint).
            dump_trace(unnoted, Path(path))
            reprocheck.refresh(adapter, session.variant, unnoted, Path(path), Path(args.reports),
                               runs=args.verify, op_timeout=args.op_timeout)
        if new is not trace:
            written_path = corpus.entry_path(new, Path(args.corpus))
            if not written_path.exists():  # an entry that is there already is kept as it was
                corpus.save(new, Path(args.corpus))
                # Its script is verified as a campaign verifies a new finding's (reprocheck).
                reprocheck.refresh(adapter, session.variant, new, written_path,
                                   Path(args.reports), runs=args.verify,
                                   op_timeout=args.op_timeout)
            written = str(written_path)
            if args.replace and Path(written).resolve() != Path(path).resolve():
                Path(path).unlink()
                report.report_path(trace, Path(args.reports)).unlink(missing_ok=True)
        out.append({"path": str(path), "written": written, "category": trace.finding.category,
                    "before": result.before, "after": result.after, "judged": result.judged,
                    "cached": result.cached, "rejected": result.rejected,
                    "errors": result.errors, "passes": result.passes,
                    "stopped": result.stopped, "seconds": result.seconds})
    for session in sessions.values():
        session.close()
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        for r in out:
            print(f"{r['before']:>3} -> {r['after']:<3} {r['category']:16} {r['path']}"
                  + (f" => {r['written']}" if r["written"] != r["path"] else "")
                  + f" ({r['judged']} candidates run, {r['stopped']}, {r['seconds']}s)")
    return 0


def _recorded_rate(trace):
    """The rate a timing-dependent entry recorded (``finding.reproduced``, or the older
    "timing-dependent (reproduced k/n replays)" detail), if any."""
    import re

    from .rate import Rate

    if trace.finding.reproduced:
        return trace.finding.reproduced
    match = re.match(r"timing-dependent \(reproduced (\d+)/(\d+)", trace.finding.detail)
    return Rate(int(match[1]), int(match[2])) if match else None


# -- report -------------------------------------------------------------------------------------


def _add_dedupe_command(sub) -> None:
    p = sub.add_parser("dedupe", help="list (or remove) corpus entries another entry makes "
                                      "redundant: same variant, category and mechanism")
    p.add_argument("paths", nargs="*", metavar="PATH", help="entries or directories "
                   "(default: corpus/)")
    p.add_argument("--apply", action="store_true",
                   help="remove each redundant entry and its report (default: only list them)")
    p.add_argument("--reports", default="shrink_reports", metavar="DIR", help="reports directory")
    p.set_defaults(func=_dedupe)


def _dedupe(args) -> int:
    """One entry per target, variant, category, verdict and mechanism (``corpus.duplicates``):
    the shortest is kept.  Lists the others; ``--apply`` removes them with their reports."""
    from pathlib import Path

    from .corpus import duplicates, read_entries, remove

    # Every file is read (and validated) before anything is removed.
    paths = [path for path, _ in read_entries(args.paths or None, required=False)]
    pairs = duplicates(paths)
    for redundant, kept in pairs:
        print(f"{'removed' if args.apply else 'redundant'}: {redundant} (kept {kept})")
        if args.apply:
            remove(redundant, Path(args.reports))
    print(f"{len(pairs)} of {len(paths)} entries {'removed' if args.apply else 'redundant'}")
    return 0


def _add_merge_evidence_command(sub) -> None:
    p = sub.add_parser("merge-evidence",
                       help="merge campaign evidence written elsewhere (--results of a scratch "
                            "campaign, another machine) into the evidence directory")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="evidence files, or directories of them (searched recursively)")
    p.add_argument("--into", default="results", metavar="DIR",
                   help="the evidence directory to merge into")
    p.add_argument("--dry-run", action="store_true", help="say what would change, write nothing")
    p.set_defaults(func=_merge_evidence)


def _merge_evidence(args) -> int:
    """Each source file's campaigns added to its variant's file under ``--into``, once
    (``evidence.merge``: campaigns are told apart by id, so merging twice adds nothing)."""
    from pathlib import Path

    from .evidence import merge_into

    plans = merge_into(args.paths, Path(args.into), dry_run=args.dry_run)
    words = {"new": "new file", "added": "added", "replaced": "replaced (it holds every "
             "campaign the destination had)", "already": "already there, nothing added"}
    for source, dest, planned in plans:
        more = f", {planned.added} campaign(s)" if planned.added else ""
        print(f"{source} -> {dest}: {words[planned.how]}{more}")
    changed = sum(1 for *_, m in plans if m.doc is not None)
    print(f"{changed} of {len(plans)} files {'would change' if args.dry_run else 'merged'}")
    return 0


def _add_report_command(sub) -> None:
    p = sub.add_parser("report", help="write a corpus entry's report and reproduction script again")
    p.add_argument("paths", nargs="+", metavar="PATH", help="corpus entries or directories")
    p.add_argument("--verify", type=int, default=0, metavar="N",
                   help="run each reproduction script N times in a fresh interpreter and record "
                        "how often it exits 1 (default %(default)s: generate only)")
    p.add_argument("--reports", default="shrink_reports", metavar="DIR", help="reports directory")
    p.add_argument("--target", metavar="MOD:CLASS",
                   help="the adapter of entries found with a third-party adapter (dotted path)")
    p.add_argument("--op-timeout", type=float, default=30.0, metavar="S",
                   help="seconds an operation may take before it counts as stuck")
    p.add_argument("--json", action="store_true", help="print one JSON object per entry")
    p.add_argument("--store", metavar="MOD:FUNC",
                   help="the store factory of entries fuzzed with --store (never read from an entry)")
    p.set_defaults(func=_report)


def _report(args) -> int:
    """Replay each entry to record the adapter's calls, write its script (verified ``--verify``
    times) into the entry and its report.  Entries are validated before anything runs."""
    from pathlib import Path

    from . import reprocheck
    from .corpus import read_entries
    from .targets import prepare_store, resolve, resolve_registered, select_variants, use_store

    if args.verify < 0:
        raise UsageError("--verify must be 0 or more")
    traces = read_entries(args.paths)
    adapters: dict = {}
    jobs = []
    for path, trace in traces:  # everything is checked before anything is written
        if trace.finding is None:
            raise UsageError(f"{path}: the entry has no finding to report")
        name = args.target or trace.target
        if name not in adapters:
            # The user's own --target may be any adapter; a target read from a file must be a
            # registered one (a corpus file never names code to import).
            adapters[name] = resolve(name) if args.target else resolve_registered(name)
            use_store(adapters[name], args.store)  # before its variants: the store's are named
        jobs.append((path, trace, adapters[name], select_variants(adapters[name], [trace.variant])[0]))
    for adapter in adapters.values():
        prepare_store(adapter)
    for path, trace, adapter, variant in jobs:
        trace, report_file, repro = reprocheck.refresh(
            adapter, variant, trace, path, Path(args.reports), runs=args.verify,
            op_timeout=args.op_timeout)
        rate = repro.reproduces
        summary = {"entry": str(path), "report": str(report_file), "checked": repro.checked,
                   "lines": repro.lines, "reproduced": rate.k if rate else None,
                   "runs": rate.n if rate else 0}
        if args.json:
            print(json.dumps(summary), flush=True)
        else:
            shown = f", reproduces {rate}" if rate else ""
            print(f"{report_file}: " + (f"checked script, {repro.lines} lines{shown}"
                                        if repro.script else "no script (replay line given)"),
                  flush=True)
    return 0


# -- explore ------------------------------------------------------------------------------------


def _explore(args) -> int:
    from refmodel import MUTANTS, InvalidWorkflow, Workflow, explore_reference, shortest_exposure

    try:
        gates = frozenset(int(g) for g in args.gates.split(",") if g.strip())
        values = tuple(v.strip() for v in args.values.split(",") if v.strip())
        workflow = Workflow(args.n, gates, values)
    except (ValueError, InvalidWorkflow) as exc:
        raise UsageError(f"explore: {exc}") from None
    if not 1 <= args.depth <= 6:
        raise UsageError("explore: --depth must lie in 1..6")
    admit = None
    if args.target:
        from .minimize import expressible

        admit = expressible(_capabilities(args.target, args.variant)[0])
    elif args.variant:
        raise UsageError("explore: --variant needs --target")
    started = time.monotonic()
    per_depth = explore_reference(workflow, args.depth)
    reference = shortest_exposure(workflow, None, args.depth)
    mutants = {m: shortest_exposure(workflow, m, args.depth, admit) for m in MUTANTS}
    seconds = round(time.monotonic() - started, 2)
    # A target that cannot express a mutant's exposure is no error of the model's.
    missing = [m for m, e in mutants.items() if e is None and admit is None]
    config = {**workflow.to_json(), "depth": args.depth}
    if args.target:
        config.update(target=args.target, variant=args.variant)
    if args.json:
        print(json.dumps({
            "config": config,
            "states": 1 + sum(per_depth),
            "states_per_depth": per_depth,
            "reference_divergence": None if reference is None else reference.divergence.detail,
            "mutants": {m: None if e is None else {
                "length": e.length, "category": e.divergence.category,
                "detail": e.divergence.detail, "trace": [op.to_json() for op in e.trace]}
                for m, e in mutants.items()},
            "seconds": seconds,
        }, indent=2))
    else:
        print(f"config: n={workflow.n} gates={sorted(workflow.gates)} values={list(values)} "
              f"depth={args.depth}")
        print("distinct reference states first reached at depth: "
              + ", ".join(f"{d + 1}: {c}" for d, c in enumerate(per_depth))
              + f" (total {1 + sum(per_depth)}, with the empty world)")
        print("reference: " + ("no divergence at any depth" if reference is None
                               else f"DIVERGES: {reference.divergence.detail}"))
        print(f"{'mutant':16} {'len':>3}  {'category':16} shortest exposing trace")
        for m, e in mutants.items():
            if e is None:
                print(f"{m:16} {'-':>3}  NOT EXPOSED within depth {args.depth}")
                continue
            ok = "" if e.divergence.category == m else "  (MISLABELLED)"
            trace = " ; ".join(_op_text(op) for op in e.trace)
            print(f"{m:16} {e.length:>3}  {e.divergence.category:16} {trace}{ok}")
        print(f"({seconds}s)")
    if missing:
        print(f"resumefuzz: error: mutants not exposed within depth {args.depth}: "
              f"{', '.join(missing)}", file=sys.stderr)
    bad = reference is not None or missing or any(
        e.divergence.category != m for m, e in mutants.items() if e)
    return 1 if bad else 0


def _capabilities(target: str, variant: str | None):
    from .targets import prepare, resolve, select_variants

    adapter = resolve(target)
    variants = select_variants(adapter, [variant] if variant else None)
    if len(variants) > 1:
        raise UsageError(f"explore: target {target!r} has several variants; name one with "
                         f"--variant ({', '.join(v.name for v in variants)})")
    prepare(adapter)
    return adapter.capabilities(variants[0]), variants[0]


def _op_text(op) -> str:
    doc = op.to_json()
    parts = [doc["thread"]]
    for key in ("value", "gate", "new_thread", "how", "values"):
        if doc.get(key) not in (None, False):
            parts.append(f"{key}={doc[key]}")
    crash = doc.get("crash")
    if crash:
        parts.append(f"crash={crash['task']}/{crash['phase']}/{crash['kind']}")
    if doc.get("bad_output"):
        parts.append(f"bad_output={doc['bad_output']}")
    return f"{doc['op']}({', '.join(str(p) for p in parts)})"


# -- nightly ------------------------------------------------------------------------------------


def _nightly(args) -> int:
    from .nightly import NightlyOptions, run_nightly

    _positive("--jobs", args.jobs, integer=True)
    _positive("--per-campaign", args.per_campaign)
    _positive("--total", args.total)
    _positive("--max-examples", args.max_examples, integer=True)
    _positive("--op-timeout", args.op_timeout)
    _seed(args.seed)
    for flag, value in (("--corpus", args.corpus), ("--reports", args.reports),
                        ("--results", args.results)):
        _writable(flag, value)
    if args.targets:
        from .targets import resolve

        for name in args.targets:
            resolve(name)  # an unknown target is a usage error before anything runs
    if Path(args.corpus).is_dir():  # replayed after the campaigns: refused before them
        from .corpus import read_entries

        read_entries([args.corpus], required=False)
    options = NightlyOptions(args.targets, args.per_campaign, args.total, args.max_examples,
                             args.jobs, args.seed, args.profile, args.op_timeout,
                             Path(args.corpus), Path(args.reports), Path(args.results),
                             Path(args.results) / "matrix")
    log = (lambda line: print(line, file=sys.stderr)) if args.json else print
    summary = run_nightly(options, log=log)
    if args.json:
        print(json.dumps(summary.to_json(), indent=2, ensure_ascii=False))
    else:
        found = sum(len(c.get("findings", [])) for c in summary.campaigns)
        print(f"nightly: {len(summary.campaigns)} campaigns, {found} findings, "
              f"{len(summary.replays)} entries replayed, {len(summary.changed)} changed, "
              f"{len(summary.unavailable)} targets not installed here; "
              f"matrix: {', '.join(summary.matrix)} ({summary.seconds}s)")
    errors = [c for c in summary.campaigns if "error" in c]
    from .internal import lifetime

    if lifetime.stop_signal():
        print(f"resumefuzz: stopped by {_signame(lifetime.stop_signal())}; every finding shown "
              "was written; the corpus was not replayed", file=sys.stderr)
        return 128 + lifetime.stop_signal()
    return 2 if errors else 0


# -- matrix -------------------------------------------------------------------------------------


def _matrix(args) -> int:
    from adapters.files import atomic_write_text

    from .corpus import read_entries
    from .matrix import build, relative_links, render

    # The matrix lists an unreadable entry under its table; given on the command line, a corpus
    # with a file that is no trace is refused up front instead (one line, exit 2).
    if Path(args.corpus).exists():
        read_entries([args.corpus], required=False)
    rows = build(args.targets or None, Path(args.results), Path(args.corpus), Path(args.reports))
    if not rows:
        raise UsageError(f"no evidence under {args.results}/ and no findings under {args.corpus}/: "
                         "run a campaign first (resumefuzz fuzz TARGET)")
    if args.output:
        relative_links(rows, Path(args.output).resolve().parent)
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(Path(args.output), render(rows, args.format))
        print(f"wrote {args.output}")
    else:
        sys.stdout.write(render(rows, args.format))
    return 0


# -- defects and promises -----------------------------------------------------------------------


def _defects(args) -> int:
    from adapters.files import atomic_write_text

    from .corpus import read_entries
    from .defects import build, render_json, render_md
    from .targets import known_targets

    for name in args.framework or ():
        if name not in known_targets():
            raise UsageError(f"--framework {name!r}: not a target ({', '.join(known_targets())})")
    if not Path(args.corpus).is_dir():
        raise UsageError(f"--corpus {args.corpus}: not a directory")
    # The ledger skips what it cannot read; on the command line a bad file is refused up front.
    read_entries([args.corpus], required=False)
    defects = build(args.framework, Path(args.corpus), Path(args.reports), Path(args.upstream))
    if args.json:
        text = render_json(defects)
    else:
        base = Path(args.output).resolve().parent if args.output else None
        text = render_md(defects, base)
    if args.output:
        atomic_write_text(Path(args.output), text)
        print(f"wrote {args.output}: {len(defects)} defects")
    else:
        sys.stdout.write(text)
    return 0


def _promises(args) -> int:
    from .promises import missing, promises_for, render_md, sentence

    table = promises_for(args.framework)
    if args.format == "md":
        sys.stdout.write(render_md(args.framework))
    elif args.format == "json":
        print(json.dumps([{"property": p.property, "quote": p.quote, "source": p.source,
                           "why": p.why, "options": dict(p.options)} for p in table],
                         indent=2, ensure_ascii=False))
    else:
        for p in table:
            where = ", ".join(f"{k}={v}" for k, v in p.options.items())
            print(f"{p.property}{f' [{where}]' if where else ''}: {sentence(p, args.framework)}")
    gaps = missing(args.framework)
    if gaps:
        print(f"resumefuzz: {args.framework} declares no promise for {', '.join(gaps)}",
              file=sys.stderr)
    return 0


# -- targets ------------------------------------------------------------------------------------


def _targets(args) -> int:
    from .targets import known_targets, resolve, use_store

    if not args.target:
        print("\n".join(known_targets()))
        return 0
    adapter = resolve(args.target)
    use_store(adapter, args.store)
    if args.json:
        print(json.dumps({"target": args.target, "variants": [{
            "name": v.name, "description": v.description, "options": dict(v.options),
            "operations": _expressed(adapter.capabilities(v)),
            "not_expressible": dict(adapter.capabilities(v).not_expressible),
            "stale_handle": adapter.capabilities(v).stale_handle,
            "deviations": [{"category": d.category, "citation": d.citation, "scope": d.scope,
                            "owner": d.owner, **({"remedy": d.remedy} if d.remedy else {}),
                            **_limits(d)} for d in adapter.deviations(v)],
        } for v in adapter.variants()]}, indent=2, ensure_ascii=False))
        return 0
    for variant in adapter.variants():
        caps = adapter.capabilities(variant)
        print(f"{variant.name}: {variant.description}")
        print(f"  operations: {', '.join(_expressed(caps))}")
        if caps.stale_handle:
            print(f"  stale handle: {caps.stale_handle}")
        for op, why in sorted(caps.not_expressible.items()):
            print(f"  n/a {op}: {why}")
        for d in adapter.deviations(variant):
            limits = "; ".join(k if v is True else f"{k}: {', '.join(v)}"
                               for k, v in _limits(d).items())
            owner = " (the caller's)" if d.owner == "caller" else ""
            print(f"  D{owner} {d.category}{f' [{limits}]' if limits else ''}: {d.scope} "
                  f"({d.citation})" + (f"; the caller must add: {d.remedy}" if d.remedy else ""))
    return 0


def _limits(deviation) -> dict:
    """A deviation's machine-readable limits (``Deviation.ops``, ``after_crash_kinds``,
    ``rules``, ``tamper_hows``, ``superseded``), the non-empty ones, sorted."""
    fields = {"ops": deviation.ops, "after_crash_kinds": deviation.after_crash_kinds,
              "rules": deviation.rules, "tamper_hows": deviation.tamper_hows}
    out = {k: sorted(v) for k, v in fields.items() if v}
    if deviation.superseded:
        out["superseded"] = True
    return out


def _expressed(caps) -> list:
    """The operations a variant expresses (``Capabilities.expresses``), sorted."""
    return sorted(op for op in OPERATIONS if caps.expresses(op))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
