"""Shrink reports: a Markdown page per failure, with a section ready to paste upstream.

``shrink_reports/<target>/<variant>/<Category>-<fingerprint>.md``: banners when the script did
not reproduce (or reproduced only sometimes) or the replay rate is partial; the numbered
operations with every outcome the contract allows next to what was observed (and the
framework's exception text); the property broken and our semantics notes
(``docs/semantics.md``); the ``resumefuzz replay`` line; and an upstream issue (title, versions,
what happened, what the documentation promises, the reproduction script and how often it
reproduced).  A record offers no upstream issue (``unfileable``: an entry whose last replay is
``FIXED`` or ``CHANGED``, a divergence that never came back): its last section says why, and
shows a checked script only, as a regression check.  ``resumefuzz report PATH`` writes it again
from a corpus entry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from adapters.files import atomic_write_text
from refmodel import CATEGORY_INFO

from .corpus import slug
from .judge import CONSEQUENCE_WORDS
from .promises import promise_for, remedy_for, sentence
from .rate import Rate
from .trace import Trace

REPORTS_DIR = Path("shrink_reports")
SEMANTICS = Path("docs/semantics.md")
CONTRACT = Path("docs/contract.md")
BUILTIN_TARGETS = ("reference", "langgraph", "crewai", "llamaindex", "pydantic-graph", "autogen")
# What ``reprocheck.verify`` records for a run that never reached the verdict: an import that
# failed (a user's store module without its PYTHONPATH), a store that could not be set up.
COULD_NOT_RUN = "the script could not run: "


@dataclass(frozen=True, slots=True, kw_only=True)
class Reproduction:
    """A finding's standalone script, as the report shows it (``reprocheck.reproduce`` makes it).

    Every script shown checks the defect: it exits 1 when it shows, 0 when it does not.  A
    script that only printed what happens read as a reproduction to file while proving nothing,
    so where the adapter writes no checked script there is none (``script`` is ``None``) and
    the report gives the replay line instead."""

    script: str | None
    reproduces: Rate | None = None  # exited 1 in k of n fresh runs
    outputs: tuple = ()  # the last lines each run printed, for a reader chasing a 0/n
    # The adapter's generator raised (a tool error, never the framework's): what it raised.  The
    # report says so; the campaign counts it.
    error: str = ""
    attempts: int = 1  # runs of its scenario one run of the script makes at most (``repeated``)

    @property
    def checked(self) -> bool:
        """A script is there (and, being the adapter's generator's, checks the defect)."""
        return bool(self.script)

    @property
    def lines(self) -> int:
        return len(self.script.splitlines()) if self.script else 0

    @property
    def could_not_run(self) -> str:
        """What stopped the script before its verdict in every verified run (the last run's
        error line), or ``""`` when some run reached its verdict or none was made.  Such a
        script shows nothing about the framework: the report says what failed instead of
        "the script misses something the harness does"."""
        if not self.outputs or not all(COULD_NOT_RUN in o for o in self.outputs):
            return ""
        return self.outputs[-1].partition(COULD_NOT_RUN)[2]

#: docs/contract.md §4, one line per property: what a framework promises.
PROMISES = {
    "PC": "after every operation the persisted state equals the state its durable prefix implies, "
          "and every effect that fired is reflected in it",
    "EO": "in every branch each task's effect fires at most once, and exactly once when the run "
          "completes",
    "FD": "a fork answering v ends with that answer recorded and fires the gate task's effect "
          "with v in the new branch",
    "CV": "no invalid state is persisted, and invalid or tampered persisted state is refused "
          "loudly, never used silently",
    "CO": "one interrupt is consumed at most once, sequentially and across processes",
    "RD": "identical durable state gives identical recovery decisions",
    "LV": "from every durable state reachable after a crash, recovery completes the run",
}


def cell(text: str) -> str:
    """``text`` safe inside a Markdown table cell: ``|`` escaped, line breaks as ``<br>``."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", "<br>")


def _stuck(o) -> bool:
    """A stuck op (or racer) raised nothing: its error says how long it waited, and where."""
    return "stuck" in o.outcome.split("|")


def _raised(observed) -> str:
    """What the diverging op's error says, in a sentence: what the framework raised, or for a
    stuck op how long it waited and where its worker was then."""
    if observed is None or not observed.error:
        return ""
    if _stuck(observed):
        return f" The operation gave {observed.error}."
    return f" The framework raised `{observed.error}`."


def _obs(o) -> str:
    if o is None:
        return "-"
    effects = ", ".join(f"e{t}({v})" if v is not None else f"e{t}" for _, t, v in o.effects) or "none"
    state = "not compared (tampered)" if o.state is None else json.dumps(o.state.to_json())
    text = f"**{o.outcome}**; effects: {effects}; state: `{state}`"
    if o.error:
        text += f"; `{o.error}`" if _stuck(o) else f"; raised `{o.error}`"
    if o.twin is not None:
        text += f"<br>twin copy: {_obs(o.twin)}"
    return text


def _allowed(alternatives, canonical) -> str:
    if not alternatives:
        return _obs(canonical) + " (canonical)"
    return "<br>*or* ".join(_obs(o) for o in alternatives)


def _op(op) -> str:
    args = {k: v for k, v in op.to_json().items() if k not in ("op",) and v not in (None, False)}
    return f"`{op.name}({', '.join(f'{k}={v!r}' for k, v in args.items())})`"


def replay_line(trace: Trace, corpus_path: Path, target_path: str | None = None) -> str:
    """The command that replays the entry; an adapter loaded by dotted path is named."""
    builtin = trace.target in BUILTIN_TARGETS or trace.target.startswith("mutant:")
    if builtin or not (target_path or ":" in trace.target):
        line = f"resumefuzz replay {corpus_path}"
    else:
        line = f"resumefuzz replay {corpus_path} --target {target_path or trace.target}"
    # A store built by a factory (--store) is named again: a corpus file never imports one.
    factory = trace.versions.get("store-factory")
    return line + (f" --store {factory}" if factory else "")


def _banners(trace: Trace, repro) -> list:
    f, out = trace.finding, []
    rate = getattr(repro, "reproduces", None)
    if _selftest(trace):
        out.append("There is no standalone reproduction script for this finding (the self-test "
                   "targets have no framework).")
    elif (repro is None or not repro.script) and unfileable(trace) is not None:
        pass  # a record: its last section says why nothing is filed
    elif repro is None or not repro.script:
        out.append(f"**No checked script**: {_why_unchecked(repro)} Replay it with resumefuzz "
                   "(the line under Replay).")
    elif trace.status == "FIXED" and rate is not None:
        # The entry's replay matches the reference now: a script that checks the recorded
        # defect should exit 0 too; one that still exits 1 disagrees with the replay.
        out.append(f"This entry is **FIXED** (its replay matches the reference now), and its "
                   f"script, which checks the recorded defect, exits 0 in {rate.n - rate.k} of "
                   f"{rate.n} fresh runs, as it should." if rate.never else
                   f"**The script and the replay disagree**: the entry is FIXED (its replay "
                   f"matches the reference now), yet its script still shows the recorded defect "
                   f"in {rate.k} of {rate.n} fresh runs.  The harness's replay misses what the "
                   "script shows, or the script checks more than the harness: look before filing.")
    elif rate is not None and rate.never and getattr(repro, "could_not_run", ""):
        out.append(f"**The reproduction script could not run** (in none of {rate.n} fresh runs "
                   f"did it reach its check): {repro.could_not_run}.{_run_hint(trace, repro)} "
                   "It says nothing about the framework yet. Do not file it upstream as is.")
    elif rate is not None and rate.never:
        out.append(f"**The reproduction script did NOT reproduce the defect** (exit 1 in 0 of "
                   f"{rate.n} fresh runs{_tries(repro)}). `resumefuzz replay` still shows the "
                   "divergence; the script misses something the harness does. Do not file it "
                   "upstream as is.")
    elif rate is not None and not rate.always:
        out.append(f"The reproduction script shows the defect in {rate.k} of {rate.n} runs"
                   f"{_tries(repro)} (timing-dependent).")
    elif rate is None:
        out.append("The reproduction script was not run (no `--verify`).")
    if f.rate and not f.never_reproduced:
        out.append(f"The fuzzer's own replays: the divergence came back in {f.rate} of them "
                   "(timing-dependent).")
    if trace.status and trace.status != "FAILED":
        out.append(f"The last recorded replay of this entry: **{trace.status}**.")
    return [f"> {b}" for b in out] + ([""] if out else [])


def _why_unchecked(repro) -> str:
    """Why a report shows no script: none was asked for (``repro`` is ``None``: ``resumefuzz
    report ENTRY --verify 3`` writes and checks one), the adapter's generator raised (a tool
    error), or it writes none for a trace like this one."""
    if repro is None:
        return ("none was written with this report (`resumefuzz report <entry> --verify 3` "
                "writes and checks one).")
    error = repro.error
    if error:
        return (f"the adapter's generator failed on this finding (a tool error, not the "
                f"framework's): {error}.")
    return "the adapter does not write a standalone script for a trace like this one yet."


def _run_hint(trace: Trace, repro) -> str:
    """What to try when a script could not import what it needs."""
    if "ImportError" not in repro.could_not_run and "ModuleNotFoundError" not in repro.could_not_run:
        return ""
    factory = trace.versions.get("store-factory")
    if factory:  # the user's own module: importable under resumefuzz, not in a fresh interpreter
        return (f" The store module `{factory.split(':')[0]}` must be importable where the "
                "script runs: set PYTHONPATH to the folder that holds it (and install the "
                "versions the script's header pins).")
    return " Install the versions the script's header pins."


def _tries(repro) -> str:
    """How many times one run of a timing-dependent finding's script tries its scenario."""
    attempts = getattr(repro, "attempts", 1)
    return f", each trying its scenario up to {attempts} times" if attempts > 1 else ""


def _note(f) -> list:
    """The entry's note (``finding.note``) first: for an Unclassified entry, why no category fits."""
    if not f.note:
        return []
    head = "Why no category fits" if f.category == "Unclassified" else "Note"
    return [f"> **{head}**: {f.note}", ""]


def _selftest(trace: Trace) -> bool:
    return trace.target == "reference" or trace.target.startswith("mutant:")


def _semantics_link(path: Path | None, doc: Path = SEMANTICS) -> str:
    """Relative to the report: reports live three levels below the reports directory, which
    sits at the top of the repository (``shrink_reports/<target>/<variant>/<name>.md``)."""
    return "../../../" + doc.as_posix() if path is not None else doc.as_posix()


def render(trace: Trace, corpus_path: Path, repro=None, *, allowed=None,
           target_path: str | None = None, path: Path | None = None) -> str:
    """The report.  ``repro``: a ``Reproduction`` (``None``: no script was asked for);
    ``allowed``: per step, every allowed observation (``reprocheck.allowed_steps``); ``path``:
    where the report goes (for the relative link to our semantics notes)."""
    f = trace.finding
    info = CATEGORY_INFO[f.category]
    promised = _promised(trace)
    verdict = {("D", "caller"): "caller-owned deviation (D): the state is in the caller's hands",
               ("D", "framework"): "documented deviation (D)",
               ("✗", "store"): "defect (✗) of the store under test"}.get(
                   (f.verdict, f.owner), "defect (✗)")
    if unfileable(trace) is not None:
        verdict += ", as recorded (nothing to file now: see the end)"
    semantics = _semantics_link(path)
    contract = _semantics_link(path, CONTRACT)
    allowed = list(allowed or [])
    rate = getattr(repro, "reproduces", None)
    lines = [f"# {f.category} in {trace.target} [{trace.variant}]", "", *_note(f),
             *_banners(trace, repro)]
    lines += [
        f"- **Category**: `{f.category}` (switch {info.paper_switch} of the TLA+ model in "
        f"*Resume Means Resume*, [contract §5]({contract}#5-fault-categories))",
        f"- **Property broken**: {f.property}"
        + (f" ({PROMISES[f.property]})" if f.property in PROMISES else ""),
        *([f"- **What {trace.target} promises here**: {promised}"] if promised else []),
        f"- **Verdict**: {verdict}" + (f" — {f.citation}" if f.citation else ""),
        f"- **Why**: {f.detail}",
        *([f"- **Reproduced**: {f.reproduced.k} of {f.reproduced.n} replays right after "
           "the campaign" + (" (it depends on timing: its regression test replays it in trials)"
                             if f.rate else "")]
          if f.reproduced is not None and not f.never_reproduced else []),
        f"- **Workflow**: {trace.workflow.n} tasks, gates {sorted(trace.workflow.gates)}, "
        f"values {list(trace.workflow.values)}",
        "- **Versions**: " + ", ".join(f"{k} {v}" for k, v in sorted(trace.versions.items())),
        f"- **Fingerprint**: `{trace.fingerprint}` (found {trace.created})",
        "- **Reproduction script**: " + _script_summary(repro),
        "",
        *([f"> **Never came back**: 0 of {f.reproduced.n} replays right after the campaign "
           "reproduced it, so it was dropped from the corpus; this report is its only record.",
           ""] if f.never_reproduced else []),
        "## Minimal trace",
        "",
        "| # | operation | allowed (reference) | observed |",
        "|---|---|---|---|",
    ]
    for i, op in enumerate(trace.operations):
        expected = trace.expected[i] if i < len(trace.expected) else None
        observed = trace.observations[i] if i < len(trace.observations) else None
        mark = " ⟵ diverges" if i == f.step else ""
        alternatives = allowed[i] if i < len(allowed) else ()
        lines.append(f"| {i + 1} | {cell(_op(op) + mark)} | {cell(_allowed(alternatives, expected))}"
                     f" | {cell(_obs(observed))} |")
    lines += [
        "",
        f"*Allowed* lists every outcome the contract allows ([contract §3]({contract}"
        "#3-observations), with the choices it leaves open settled in [our semantics notes]"
        f"({semantics})); the observation diverges when it is none of them.",
        "",
        "## Replay",
        "",
        *(["Not in the corpus (it never came back on replay)."] if f.never_reproduced else
          ["```", replay_line(trace, corpus_path, target_path), "```"]),
        "",
        *(_upstream(trace, repro, rate, allowed[f.step] if f.step < len(allowed) else (),
                    replay_line(trace, corpus_path, target_path))
          if unfileable(trace) is None else _nothing_to_file(trace, repro)),
    ]
    return "\n".join(lines) + "\n"


def unfileable(trace: Trace) -> str | None:
    """Why the report offers no upstream issue, or None when it does.  A record is not a bug
    report: an entry whose last replay matches the reference (``FIXED``: a release fixed it, or
    our judge no longer calls it a defect), or diverges in another category (``CHANGED``: what
    it shows now is not what the report says), or a divergence that never came back."""
    f = trace.finding
    if f.verdict == "D" and f.detail.startswith(f"{f.property} {CONSEQUENCE_WORDS}"):
        return ("the framework documents the loss this follows from (the citation above); this "
                "entry records what that loss costs a user, the property it breaks under the "
                "same citation, so that the matrix never reads it as kept")
    if f.verdict == "D" and f.owner == "caller":
        return ("the state is the caller's: the framework's documentation puts it in the caller's "
                "hands (the citation above), so what the caller must add is below, and the "
                "framework's maintainers owe nothing here")
    if f.never_reproduced:
        return (f"it never came back: 0 of {f.reproduced.n} replays right after the campaign "
                "reproduced it, so a maintainer could not see it either")
    if trace.status == "FIXED":
        return ("its last recorded replay matches the reference (`FIXED`): at the versions of that "
                "replay there is no divergence to report")
    if trace.status == "CHANGED":
        return ("its last recorded replay diverges in another category (`CHANGED`): what it shows "
                "now is not what this report describes; `resumefuzz replay --relabel` records it "
                "again, and the report written then is the one to file")
    return None


def _nothing_to_file(trace: Trace, repro) -> list:
    out = ["## Upstream issue: nothing to file", "",
           f"This report is a record, not a bug report: {unfileable(trace)}."]
    f = trace.finding
    remedy = remedy_for(trace.target, trace.variant, f.citation) if f.verdict == "D" else ""
    if remedy:
        out += ["", f"**What the caller must add**: {remedy}"]
    if repro is not None and repro.script and f.owner == "caller":
        rate = repro.reproduces
        shown = f" It exited 1 in {rate.k} of {rate.n} fresh runs." if rate else ""
        out += ["", f"**What the caller's state allows** ({repro.lines} lines, the framework's "
                "public API as the documentation has the caller use it): it exits 1 when it "
                f"happens and 0 when it does not.{shown}", "", "```python",
                repro.script.rstrip(), "```"]
    elif repro is not None and repro.script:
        # A checked script of a FIXED entry exits 0 now: kept as the regression check it is.
        rate = repro.reproduces
        shown = (f" Yet it exited 1 in {rate.k} of {rate.n} fresh runs: the script and the "
                 "replay disagree (see the top), so look before taking this for fixed."
                 if rate and not rate.never else "")
        out += ["", f"**Regression script** ({repro.lines} lines): it exits 1 if the recorded "
                f"defect shows again and 0 while it does not.{shown}", "", "```python",
                repro.script.rstrip(), "```"]
    return out


def _script_summary(repro) -> str:
    if repro is None or not repro.script:
        return "none"
    rate = repro.reproduces
    shown = f"reproduces {rate}" if rate else "not verified"
    return f"checks the defect (exit 1 when it shows), {repro.lines} lines, {shown}"


def _upstream(trace: Trace, repro, rate, allowed_here=(), replay: str = "") -> list:
    f = trace.finding
    observed = trace.observations[f.step] if f.step < len(trace.observations) else None
    store = "store-factory" in trace.versions  # fuzzed on a third-party store (--store)
    # Whose defect it is the trace cannot say (LangGraph accepting a bad output on any saver, or a
    # store that drops what the framework saved): the title names both; the versions, the store.
    framework = trace.target + (" with a third-party store" if store else "")
    pins = ", ".join(f"{k} {v}" for k, v in sorted(trace.versions.items())
                     if k not in ("resumefuzz", "hypothesis"))
    allowed = (" or ".join(dict.fromkeys(o.outcome for o in allowed_here)) if allowed_here
               else "see the trace")
    if f.category == "Unclassified":
        promise = (f"the resume contract allows, at this step, only: {allowed} (every allowed "
                   "outcome is in the trace above); this divergence fits none of the named fault "
                   "categories")
    else:
        promise = _promised(trace) or (
            f"the resume contract's property {f.property}: {PROMISES[f.property]}")
    remedy = remedy_for(trace.target, trace.variant, f.citation) if f.verdict == "D" else ""
    out = [
        "## Upstream issue (ready to paste)",
        "",
        f"**Title**: {framework}: {_title(trace)}",
        "",
        f"**Versions**: {pins}",
        "",
        "**What happened**: " + f.detail
        + _raised(observed),
        "",
        "**What the documentation promises**: " + promise,
        "",
        *([f"**Why this is a D, not a ✗**: {f.citation}", ""] if f.verdict == "D" else []),
        *([f"**What the caller must add**: {remedy}", ""] if remedy else []),
    ]
    if repro is not None and repro.script:
        how = ("It exits 1 when the defect shows and 0 when it does not"
               + (f"; it exited 1 in {rate.k} of {rate.n} fresh runs{_tries(repro)}."
                  if rate else "."))
        uses = ("the framework's public API, the store's package and the standard library"
                if store else "the framework's public API and the standard library")
        out += [f"**Reproduction** ({uses}; "
                f"{repro.lines} lines). {how}", "", "```python", repro.script.rstrip(), "```"]
    else:
        out += [f"**Reproduction**: no checked script: {_why_unchecked(repro)} Replay it with "
                "resumefuzz:", "",
                "```", replay or "resumefuzz replay <entry>", "```"]
    return out


def _promised(trace: Trace) -> str:
    """What the framework promises for the finding's property and category, in its own words
    (or that it promises nothing there): never our contract (docs/contract.md §5, "Whose defect").
    ``""`` for the self-test targets, which have no framework, and an Unclassified finding."""
    f = trace.finding
    if _selftest(trace) or f.category == "Unclassified":
        return ""
    return sentence(promise_for(trace.target, trace.variant, f.property, f.category),
                    trace.target)


def _title(trace: Trace) -> str:
    f = trace.finding
    ops = trace.operations
    op = ops[f.step] if f.step < len(ops) else None
    where = f" {op.name}" if op is not None else ""
    what = f.detail.split(": ")[-1] if f.detail.startswith("timing-dependent") else f.detail
    return f"{f.category} on{where}: {what}"


def report_path(trace: Trace, root: Path = REPORTS_DIR) -> Path:
    name = f"{trace.finding.category}-{trace.fingerprint}.md"
    return Path(root) / slug(trace.target) / slug(trace.variant) / name


def write(trace: Trace, corpus_path: Path, repro=None, root: Path = REPORTS_DIR, *,
          allowed=None, target_path: str | None = None) -> Path:
    path = report_path(trace, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, render(trace, corpus_path, repro, allowed=allowed,
                                   target_path=target_path, path=path))
    return path
