"""The defect ledger: distinct defects, not cells.

One root cause shows in many variants (LangGraph accepting a race's second consumer on every
saver) and the matrix repeats it in each of their cells; a maintainer reads a handful of defects
per framework instead.  A *defect* here is the set of failing corpus entries of one target that
share a signature (``signature``): the category, the verdict, the operation that diverged, what
went in before it (tamper kinds, crash kinds, an out-of-schema output) and the divergence's
detail with its values taken out.  Variants and saver backends are deliberately not part of it.

Each defect carries (``Defect``): the property and category, whose it is (``owner``:
``framework``, ``store`` or ``caller``, docs/contract.md §5 "Whose defect"), the framework's own
promise it breaks (``fuzz.promises``; or that it promises nothing there), the variants and operation
shapes that show it, the shortest entry with a verified script, the releases it was observed on,
and an upstream link a maintainer fills in ``results/upstream.json`` (``{defect id: url}``; the
tool never goes online and never writes that file).

Owner: ``caller`` when the entries' verdict is a caller-owned ``D``; on a third-party store
(``store-*`` variants, ``--store``), ``framework`` when a built-in variant of the same target
shows the same signature (the built-in store shows it too), else ``store``; ``framework``
otherwise.  Entries whose finding never reproduced, FIXED entries and Unclassified ones (gaps,
listed by the matrix) are not defects.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from refmodel import CATEGORY_INFO

from . import evidence
from .corpus import CORPUS_DIR, entries
from .errors import ResumefuzzError, UsageError
from .promises import promise_for
from .report import REPORTS_DIR, report_path
from .trace import detours, load_trace

UPSTREAM = Path("results") / evidence.UPSTREAM_NAME

# The distribution whose release a finding is "observed on", per framework target.
MAIN_DISTRIBUTION = {
    "langgraph": "langgraph",
    "crewai": "crewai",
    "llamaindex": "llama-index-workflows",
    "pydantic-graph": "pydantic-graph",
    "autogen": "autogen-agentchat",
}


@dataclass(frozen=True)
class Defect:
    id: str
    target: str
    property: str
    category: str
    verdict: str  # "✗" or "D"
    owner: str  # "framework" | "store" | "caller"
    what: str  # the signature in words
    promise: dict  # {"quote", "source"} | {"why"} | {} (none recorded)
    citation: str  # a D's citation
    variants: tuple
    shapes: tuple  # the operation shapes (witness traces, op names) that show it
    entries: tuple  # corpus paths
    fingerprints: tuple  # (variant, fingerprint) of each entry: how the matrix finds its defect
    witness: str  # the corpus entry to read first
    report: str  # its shrink report
    script: str  # "checked, N lines, reproduces k/n" | "none"
    releases: tuple
    upstream: str = ""

    def to_json(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


def _template(detail: str) -> str:
    """The detail with its values taken out: quoted strings, numbers, lists and dicts (a
    persisted state keeps its status, which tells one cause from another)."""
    statuses = re.findall(r"'status': '(\w+)'", detail)
    text = detail
    for pattern, blank in ((r"\[[^\[\]]*\]", "[…]"), (r"\{[^{}]*\}", "{…}")):
        while True:  # innermost first, until a nested value is one blank
            shorter = re.sub(pattern, blank, text)
            if shorter == text:
                break
            text = shorter
    text = re.sub(r"'[^']*'", "'…'", text)
    text = re.sub(r"\d+", "N", text)
    text = re.sub(r"^timing-dependent \([^)]*\): ", "", text)
    return text + (f" (status {' -> '.join(statuses)})" if statuses else "")


def _op(op) -> str:
    text = op.name
    if op.name == "tamper":
        text += f":{op.how}"
    crash = getattr(op, "crash", None)
    if crash is not None:
        text += f"!{crash.kind}"
    if getattr(op, "bad_output", None) is not None:
        text += "+bad_output"
    return text


def signature(trace) -> tuple:
    """What entries of one defect share (see the module docstring)."""
    f = trace.finding
    ops = trace.operations[: f.step + 1]
    before = sorted({_op(op) for op in ops[:-1]
                     if op.name == "tamper" or getattr(op, "crash", None) is not None
                     or getattr(op, "bad_output", None) is not None})
    return (trace.target, f.verdict, f.category, _op(ops[-1]), tuple(before),
            _template(f.detail), f.owner if f.owner == "caller" else "")


def _store(trace) -> bool:
    return "store-factory" in trace.versions or trace.variant.startswith("store-")


def _script_text(trace) -> str:
    s = trace.finding.script
    if not s or not s.get("checked"):
        return "none checked (replay it)"
    shown = f", reproduces {s['reproduced']}/{s['runs']}" if s.get("runs") else ""
    return f"checked, {s.get('lines', '?')} lines{shown}"


def _witness(traces):
    """The entry a maintainer reads first: the fewest detours (``trace.detours``), a verified
    script that reproduces every time, then the shortest, then a stable tie-break."""
    def key(item):
        _path, t = item
        s = t.finding.script or {}
        verified = bool(s.get("checked")) and s.get("reproduced", 0) == s.get("runs", -1)
        return (detours(t), not verified, bool(t.finding.rate), len(t.operations),
                s.get("lines", 10**6), t.fingerprint)
    return min(traces, key=key)


def build(targets=None, corpus_dir: Path = CORPUS_DIR, reports_dir: Path = REPORTS_DIR,
          upstream: Path = UPSTREAM) -> list[Defect]:
    """The ledger of the corpus under ``corpus_dir`` (only ``targets``, when given)."""
    links = _links(upstream)
    groups: dict = {}
    for path in entries(None, corpus_dir):
        try:
            trace = load_trace(path)
        except ResumefuzzError:
            continue  # the matrix lists unreadable entries; the ledger counts defects
        f = trace.finding
        if (f is None or trace.status not in (None, "FAILED", "CHANGED")
                or f.never_reproduced or f.category == "Unclassified"):
            continue
        if targets and trace.target not in targets:
            continue
        groups.setdefault(signature(trace), []).append((path, trace))
    builtin = {key[:6] for key, items in groups.items()
               if any(not _store(t) for _, t in items)}
    out = []
    for key, items in groups.items():
        out.append(_defect(key, items, builtin, links, reports_dir))
    return sorted(out, key=lambda d: (d.target, d.owner != "framework", d.verdict != "✗",
                                      d.property, -len(d.variants), d.id))


def _defect(key, items, builtin, links, reports_dir) -> Defect:
    target, verdict, category, op, before, template, _caller = key
    path, witness = _witness(items)
    f = witness.finding
    prop = CATEGORY_INFO[category].breaks
    if f.owner == "caller":
        owner = "caller"
    elif all(_store(t) for _, t in items) and key[:6] not in builtin:
        owner = "store"
    else:
        owner = "framework"
    ident = f"{target}-{prop}-" + hashlib.sha1(repr(key).encode()).hexdigest()[:6]
    promise = promise_for(target, witness.variant, prop, category)
    promised = ({"quote": promise.quote, "source": promise.source} if promise and promise.promised
                else {"why": promise.why} if promise else {})
    dist = MAIN_DISTRIBUTION.get(target)
    releases = sorted({t.versions[dist] for _, t in items if dist and dist in t.versions})
    what = f"{category} on {op}" + (f" after {', '.join(before)}" if before else "") \
        + f": {template}"
    return Defect(
        id=ident, target=target, property=prop, category=category, verdict=verdict, owner=owner,
        what=what, promise=promised, citation=f.citation if verdict == "D" else "",
        variants=tuple(sorted({t.variant for _, t in items})),
        shapes=tuple(sorted({", ".join(_op(o) for o in t.operations[: t.finding.step + 1])
                             for _, t in items})),
        entries=tuple(sorted(str(p) for p, _ in items)),
        fingerprints=tuple(sorted((t.variant, t.fingerprint) for _, t in items)),
        witness=str(path),
        report=str(report_path(witness, reports_dir)), script=_script_text(witness),
        releases=tuple(releases), upstream=links.get(ident, ""))


def _links(path: Path) -> dict:
    """``results/upstream.json``: a maintainer's ``{defect id: issue url}``; absent is empty."""
    path = Path(path)
    if not path.exists():
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: not a UTF-8 JSON object of defect id -> link ({exc})") from None
    if not isinstance(doc, dict) or not all(isinstance(v, str) for v in doc.values()):
        raise UsageError(f"{path}: expected a JSON object of defect id -> link (strings)")
    return doc


def index(defects: list[Defect]) -> dict:
    """``(target, variant, fingerprint)`` -> its ``Defect``: how the matrix links a cell to its
    defect, and says whose it is."""
    return {(d.target, v, fp): d for d in defects for v, fp in d.fingerprints}


def render_md(defects: list[Defect], base: Path | None = None) -> str:
    """The ledger as ``results/defects.md``: a summary per framework, then one section per
    defect.  Links are made relative to ``base`` (the directory the page sits in)."""
    import os

    def rel(p: str) -> str:
        return os.path.relpath(p, base) if base is not None else p

    lines = ["# Defect ledger", "",
             "Distinct defects: one root cause, however many variants show it "
             "(`resumefuzz defects`; how entries are grouped: `fuzz/defects.py`). "
             "Owner: whose defect it is under the framework's own documentation "
             "(docs/semantics.md, \"Whose defect\"). A maintainer fills `upstream` in "
             "`results/upstream.json`.", "",
             "| target | owner | ✗ defects | D (documented or caller-owned) | variants showing them |",
             "|---|---|---|---|---|"]
    summary: dict = {}
    for d in defects:
        row = summary.setdefault((d.target, d.owner), [0, 0, set()])
        row[0 if d.verdict == "✗" else 1] += 1
        row[2].update(d.variants)
    for (target, owner), (x, dev, variants) in summary.items():
        lines.append(f"| {target} | {owner} | {x} | {dev} | {len(variants)} |")
    for d in defects:
        lines += ["", f"## {d.id}", "",
                  f"- **{d.verdict} {d.property} / {d.category}**, owner **{d.owner}**: {d.what}"]
        if d.promise.get("quote"):
            lines.append(f"- Promise broken: \u201c{d.promise['quote']}\u201d ({d.promise['source']})")
        elif d.promise.get("why"):
            lines.append(f"- Promise: none here. Why it matters: {d.promise['why']}")
        else:
            lines.append("- Promise: none recorded")
        if d.citation:
            lines.append(f"- {'Caller-owned' if d.owner == 'caller' else 'Documented'}: "
                         f"{d.citation}")
        lines += [f"- Variants ({len(d.variants)}): {', '.join(d.variants)}",
                  f"- Shapes: {'; '.join(f'`{s}`' for s in d.shapes)}",
                  f"- Witness: [{d.report}]({rel(d.report)}) (script: {d.script}); "
                  f"replay: `resumefuzz replay {d.witness}`",
                  f"- Observed on: {', '.join(d.releases) or 'not recorded'}",
                  f"- Upstream: {d.upstream or '(not filed)'}",
                  f"- Entries: {len(d.entries)}"]
    return "\n".join(lines) + "\n"


def render_json(defects: list[Defect]) -> str:
    return json.dumps({"format": "resumefuzz-defects", "version": 1,
                       "defects": [d.to_json() for d in defects]}, indent=2,
                      ensure_ascii=False) + "\n"


__all__ = ["Defect", "build", "index", "render_json", "render_md", "signature"]
