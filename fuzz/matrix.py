"""The conformance matrix: one row per target and variant, one column per property.

Built from recorded campaign evidence (``results/``, see ``fuzz/evidence.py``) and the corpus.
A cell is

- ``✗`` a corpus entry of that property still fails (linked to its shrink report); a finding
  that came back in only k of n replays reads ``✗ (k/n)``: flaky is not ✓;
- ``D`` it fails, but only as a weakening the framework documents (with the citation);
- ``n/a`` the variant cannot express what the property needs (with the reason);
- ``✓`` searched, nothing found, and at least ``evidence.MIN_EXERCISED`` operations that could
  have broken the property ran (the cell says which);
- ``?`` not searched, or searched without exercising the property often enough (or evidence
  written before operations were counted): unknown, never ``✓``;
- ``declared`` (FI only) the adapter declares which API spelling carries which intent.

For a ``✗`` or ``D`` cell the linked witness is the trace that shows the property most directly
(``_witness``).  Each cell says how old its evidence is.
"""

from __future__ import annotations

import datetime
import html
import json
from dataclasses import dataclass, field
from pathlib import Path

from refmodel import CATEGORY_INFO

from . import defects, evidence
from .corpus import CORPUS_DIR, entries, slug
from .errors import ResumefuzzError
from .report import REPORTS_DIR, report_path
from .trace import detours, load_trace

PROPERTIES = ("PC", "EO", "FD", "CV", "CO", "RD", "FI", "LV")

# What each column means (docs/contract.md §4), for the legend.
PROPERTY_NAMES = {
    "PC": "Persisted consistency: the done list, the answers and the effects after every op",
    "EO": "Exactly once: completed work does not run again on recovery",
    "FD": "Fork divergence: a fork sees the value it was given, not its source's",
    "CV": "Checkpoint validity: damaged or out-of-schema state is refused loudly, never used",
    "CO": "Consume once: one answer is consumed by one gate, once (races, double resumes)",
    "RD": "Recovery determinism: two recoveries of one crashed store agree",
    "FI": "Fork/retry intent: the API says whether a call forks or retries",
    "LV": "Liveness: a thread that crashed can be recovered and finishes",
}
VERDICTS = {
    "✗": "defect: a corpus entry breaking the property still fails (links to its shrink report; "
         "(k/n): it came back in k of n replays)",
    "D": "documented deviation: it fails only as a weaker semantics the framework documents, or "
         "on state its documentation leaves to the caller (never ✓: what a D excuses is recorded)",
    "✓": f"searched, nothing found, and at least {evidence.MIN_EXERCISED} operations that could "
         "have broken it ran",
    "?": f"unknown: not searched, or fewer than {evidence.MIN_EXERCISED} operations that could "
         "break it ran (or they were not counted)",
    "n/a": "the variant cannot express what the property needs (gives the reason)",
    "declared": "FI: the adapter declares which API spelling carries which intent",
}

# Properties whose witness should show the defect without a tamper before the divergence: for
# them a tamper is at best a detour (and was, in issue 12, the actual cause of false ✗ cells).
UNTAMPERED = ("FD", "EO", "CO", "RD", "LV", "PC")

# What a property needs the variant to express, and what to say when it cannot.
NEEDS = {
    "FD": (lambda c: "fork" in c["operations"], "fork"),
    "FI": (lambda c: "fork" in c["operations"], "fork"),
    "CV": (lambda c: "tamper" in c["operations"] or c["bad_output"], "tamper"),
    "CO": (lambda c: "resume" in c["operations"] or "race" in c["operations"], "resume"),
    "RD": (lambda c: "twin_recover" in c["operations"], "twin_recover"),
    "LV": (lambda c: "recover" in c["operations"] and c["crash_kinds"], "recover"),
}


@dataclass
class Cell:
    verdict: str  # ✓ ✗ D n/a ? declared
    text: str = ""
    link: str = ""
    age_days: float | None = None
    detail: dict = field(default_factory=dict)
    short: str = ""  # a few words for a compact cell; ``text`` is the full detail
    rate: str = ""  # "k/n" for a finding that came back in only k of n replays

    @property
    def label(self) -> str:
        return f"{self.verdict} ({self.rate})" if self.rate else self.verdict

    def to_json(self) -> dict:
        return {"verdict": self.verdict, "text": self.text, "link": self.link,
                "age_days": self.age_days, **({"rate": self.rate} if self.rate else {}),
                **self.detail}


@dataclass
class Row:
    target: str
    variant: str
    options: dict
    cells: dict
    other: list  # Unclassified findings: gaps to report, never hidden
    age_days: float | None = None  # of the row's campaign evidence (None: no campaign recorded)
    shapes: dict = field(default_factory=dict)  # examples per workflow kind (evidence ``shapes``)

    @property
    def shapes_text(self) -> str:
        """``"shapes: loop 12, parallel 30; chains 158"`` (examples; one shape counts under
        each feature it uses); "" where no shape ran, so a chain-only row reads as before."""
        shaped = {k: n for k, n in self.shapes.items() if k != "chain"}
        if not shaped:
            return ""
        return ("shapes: " + ", ".join(f"{k} {n:,}" for k, n in shaped.items())
                + f"; chains {self.shapes.get('chain', 0):,}")


UNREADABLE: list = []  # corpus entries the last build could not read: rendered, never dropped


def _age(stamp: str, now: datetime.datetime) -> float | None:
    try:
        then = datetime.datetime.fromisoformat(stamp)
    except (TypeError, ValueError):
        return None
    return round((now - then).total_seconds() / 86400, 1)


def build(targets: list[str] | None = None, results_dir: Path = evidence.RESULTS_DIR,
          corpus_dir: Path = CORPUS_DIR, reports_dir: Path = REPORTS_DIR) -> list[Row]:
    now = datetime.datetime.now(datetime.timezone.utc)
    docs = {(d["target"], d["variant"]): d for d in evidence.load_all(results_dir)}
    findings: dict = {}
    UNREADABLE.clear()
    for path in entries(None, corpus_dir):
        try:
            trace = load_trace(path)
        except ResumefuzzError as exc:  # shown under the table, so a reader sees it
            UNREADABLE.append(str(exc))
            continue
        if trace.finding is None or trace.status not in (None, "FAILED", "CHANGED"):
            continue
        if trace.finding.never_reproduced:  # 0/n: not a finding (and not kept by a campaign)
            continue
        findings.setdefault((trace.target, trace.variant), []).append((path, trace))
    ledger = defects.index(defects.build(targets, corpus_dir, reports_dir))
    keys = sorted(set(docs) | set(findings))
    if targets:
        keys = [k for k in keys if k[0] in targets]
    rows = []
    for key in keys:
        doc = docs.get(key)
        caps = doc["capabilities"] if doc else None
        rows.append(_row(key, doc, caps, findings.get(key, []), now, reports_dir, ledger))
    return rows


def _row(key, doc, caps, found, now, reports_dir, ledger=None) -> Row:
    target, variant = key
    cells, other = {}, []
    by_prop: dict = {}
    for path, trace in found:
        category = trace.finding.category
        if category == "Unclassified":
            other.append(str(report_path(trace, reports_dir)))
            continue
        by_prop.setdefault(CATEGORY_INFO[category].breaks, []).append(trace)
    for prop in PROPERTIES:
        cells[prop] = _cell(prop, doc, caps, by_prop.get(prop, []), now, reports_dir)
        found = (ledger or {}).get((target, variant, cells[prop].detail.get("fingerprint")))
        if found is not None:  # the ledger says whose it is (a store's, told apart there)
            cells[prop].detail.update(defect=found.id, owner=found.owner)
    return Row(target, variant, dict(doc["options"]) if doc else {}, cells, other,
               _age(doc["updated"], now) if doc else None, dict((doc or {}).get("shapes") or {}))


def tamper_before_divergence(trace) -> bool:
    return any(op.name == "tamper" for op in trace.operations[:trace.finding.step])


def _witness(prop: str, traces: list):
    """The trace that shows ``prop`` most directly: for the properties in ``UNTAMPERED``, one
    without a tamper before its divergence; then the fewest detours (``detours``: witnesses a
    maintainer cannot dismiss first); then one that reproduces every time over a flaky one;
    then the shortest; the fingerprint breaks ties, so the choice is stable."""
    return min(traces, key=lambda t: (
        prop in UNTAMPERED and tamper_before_divergence(t),
        detours(t),
        bool(t.finding.rate) or t.finding.unmeasured,
        len(t.operations),
        t.fingerprint,
    ))


def _finding_cell(verdict, prop, traces, now, reports_dir) -> Cell:
    t = _witness(prop, traces)
    f = t.finding
    rate = f.rate
    text = f"{f.category} ({len(t.operations)} ops"
    text += f", reproduced {rate} replays)" if rate else ")"
    if prop in UNTAMPERED and tamper_before_divergence(t):
        text += "; every witness has a tamper before the divergence"
    if len(traces) > 1:
        text += f"; {len(traces)} entries"
    # The witness's fingerprint finds its defect in the ledger, which says whose it is.
    detail = {"category": f.category, "entries": len(traces), "fingerprint": t.fingerprint}
    if verdict == "D":
        text += f"; {f.citation}"
        detail["citation"] = f.citation
    return Cell(verdict, text, str(report_path(t, reports_dir)), _age(t.created, now), detail,
                short=f.category, rate=rate)


def _cell(prop, doc, caps, traces, now, reports_dir) -> Cell:
    defects = [t for t in traces if t.finding.verdict != "D"]
    if defects:
        return _finding_cell("✗", prop, defects, now, reports_dir)
    if traces:
        return _finding_cell("D", prop, traces, now, reports_dir)
    if caps is None:
        return Cell("?", "not searched", short="not searched")
    age = _age(doc["updated"], now)
    if prop in NEEDS:
        ok, op = NEEDS[prop]
        if not ok(caps):
            reason = caps["not_expressible"].get(op, f"{op} is not expressible")
            return Cell("n/a", reason, age_days=age, short=f"no {op}")
    if prop == "FI":
        intents = caps["intents"]
        if "indistinguishable" in intents.values():
            why = caps["not_expressible"].get("fork_retry_intent", "the API cannot say FORK or RETRY")
            return Cell("✗", f"no discriminator: {why}", age_days=age, detail={"intents": intents},
                        short="no discriminator")
        return Cell("declared", "declared: " + ", ".join(f"{k}={v}" for k, v in intents.items()),
                    age_days=age, detail={"intents": intents})
    searched = f"{doc['total_examples']:,} examples, {doc['total_operations']:,} ops"
    total = evidence.exercised_total(doc, prop)
    if total is None:
        return Cell("?", f"{searched}; the operations that could break {prop} were not counted "
                    "(evidence written before version 2): unknown", age_days=age,
                    short="not counted", detail={"examples": doc["total_examples"],
                                                 "operations": doc["total_operations"]})
    counts = doc["exercised"].get(prop, {})
    what = ", ".join(f"{k} ×{v}" for k, v in counts.items()) or "none"
    detail = {"examples": doc["total_examples"], "operations": doc["total_operations"],
              "exercised": total, "exercised_by": dict(counts)}
    if total < evidence.MIN_EXERCISED:
        return Cell("?", f"{searched}; only {total} operations that could break {prop} ran "
                    f"(fewer than {evidence.MIN_EXERCISED}): {what}", age_days=age,
                    short=f"{total} < {evidence.MIN_EXERCISED}", detail=detail)
    return Cell("✓", f"{searched}; {total} could break {prop}: {what}", age_days=age,
                short=f"{total:,} tries", detail=detail)


def relative_links(rows: list[Row], base: Path) -> list[Row]:
    """Make every link (cells and Unclassified reports) relative to the directory ``base``, where
    the rendered page will sit."""
    import os

    def rel(link: str) -> str:
        return os.path.relpath(Path(link).resolve(), Path(base).resolve())

    for row in rows:
        for cell in row.cells.values():
            if cell.link:
                cell.link = rel(cell.link)
        row.other = [rel(o) for o in row.other]
    return rows


# -- rendering ---------------------------------------------------------------------------------

ORDER = ("✗", "D", "?", "n/a", "declared", "✓")  # summary order: what needs reading first


def _age_text(days) -> str:
    if days is None:
        return ""
    return "today" if days < 1 else f"{days:.0f}d old"


def _stale(days) -> str:
    """The age, where it matters: cells older than a day say so."""
    return "" if days is None or days < 1 else f"{days:.0f}d old"


def summary(rows: list[Row]) -> dict:
    """{target: {prop: {verdict: count}}}: the per-framework table a reader wants first."""
    out: dict = {}
    for row in rows:
        per = out.setdefault(row.target, {p: {} for p in PROPERTIES})
        for prop in PROPERTIES:
            v = row.cells[prop].verdict
            per[prop][v] = per[prop].get(v, 0) + 1
    return out


def _counts_text(counts: dict, sep: str = " · ") -> str:
    return sep.join(f"{v} {counts[v]}" for v in ORDER if counts.get(v))


def _legend_md() -> list[str]:
    return (["Properties (docs/contract.md §4): "
             + "; ".join(f"**{p}** {PROPERTY_NAMES[p]}" for p in PROPERTIES) + ".", "",
             "Cells: " + "; ".join(f"`{v}` {t}" for v, t in VERDICTS.items()) + ".", ""])


def render_md(rows: list[Row]) -> str:
    lines = ["## Summary per framework", "",
             "Variants per verdict, per property (one row per target).", "",
             "| target | variants | " + " | ".join(PROPERTIES) + " |",
             "|---|---|" + "---|" * len(PROPERTIES)]
    variants = {}
    for row in rows:
        variants[row.target] = variants.get(row.target, 0) + 1
    for target, per in summary(rows).items():
        lines.append(f"| {target} | {variants[target]} | "
                     + " | ".join(_counts_text(per[p], "<br>") for p in PROPERTIES) + " |")
    lines += ["", "## Legend", ""] + _legend_md()
    lines += ["## Per variant", "",
              "`(k/n)`: came back in k of n replays. "
              "The detail behind every cell is in `resumefuzz matrix --format json` and the HTML "
              "page.", "",
              "| target | variant | evidence | " + " | ".join(PROPERTIES) + " |",
              "|---|---|---|" + "---|" * len(PROPERTIES)]
    cited = []
    for row in rows:
        cells = []
        for prop in PROPERTIES:
            c = row.cells[prop]
            body = f"[{c.label}]({c.link})" if c.link else c.label
            defect = c.detail.get("defect")
            ledger = f"[{defect}](defects.md#{defect.lower()})" if defect else ""
            owner = c.detail.get("owner", "framework")
            ledger += f" ({owner}'s)" if defect and owner != "framework" else ""
            note = " ".join(x for x in (c.short if c.verdict != "n/a" else "", ledger,
                                        _stale(c.age_days)) if x)
            cells.append(f"{body} <sub>{note}</sub>" if note else body)
            if c.verdict == "D":
                cited.append(f"- {row.target} [{row.variant}] {prop}: "
                             f"{c.detail.get('category')}: {c.detail.get('citation')}")
        said = "<br>".join(x for x in (_age_text(row.age_days), row.shapes_text) if x) or "-"
        lines.append(f"| {row.target} | {row.variant} | {said} | "
                     + " | ".join(cells) + " |")
    if cited:
        lines += ["", "Documented deviations (the `D` cells) and what they cite:"] + cited
    unclassified = [(r, o) for r in rows for o in r.other]
    if unclassified:
        lines += ["", "Unclassified divergences (gaps in the model or an adapter):"]
        lines += [f"- {r.target} [{r.variant}]: [{o}]({o})" for r, o in unclassified]
    if UNREADABLE:
        lines += ["", "Corpus entries that could not be read (not counted above):"]
        lines += [f"- {e}" for e in UNREADABLE]
    return "\n".join(lines) + "\n"


_CSS = """
body{font-family:system-ui,sans-serif;margin:1em 1.5em;font-size:14px;color:#222}
h1{font-size:1.4em;margin:.2em 0}h2{font-size:1.15em;margin:1.2em 0 .4em}
table{border-collapse:separate;border-spacing:0;width:100%;table-layout:fixed}
td,th{border:1px solid #ddd;border-width:0 1px 1px 0;padding:.25em .4em;vertical-align:top;
  text-align:left;overflow-wrap:anywhere}
thead th{position:sticky;top:0;background:#f4f4f4;z-index:2;border-top:1px solid #ddd}
th.t,td.t{width:7.5em}th.vr,td.vr{width:19em}td.vr{font-size:.85em}
th.sm{width:5em}
.ok{background:#e8f6e8}.bad{background:#fbe3e3}.dev{background:#fff4d6}
.na{background:#f2f2f2;color:#777}.unk{background:#fff}.dec{background:#eef3fb}
details{margin:0}summary{cursor:pointer;list-style:none;white-space:nowrap;overflow:hidden;
  text-overflow:ellipsis}summary::-webkit-details-marker{display:none}
.v{font-weight:bold}.s{color:#555;font-size:.82em}
.more{font-size:.82em;color:#333;margin-top:.2em}
.sum td span{display:inline-block;margin-right:.5em;white-space:nowrap}
.legends{display:flex;gap:2.5em;font-size:.9em}.legends dl{flex:1;margin:0;display:grid;
  grid-template-columns:5.5em minmax(0,1fr);gap:.15em .6em}.legends dt{font-weight:bold}
.legends dd{margin:0}.filters{padding:.4em 0}
.filters label{margin-right:1.2em}#shown{color:#555}
"""
_CLASS = {"✓": "ok", "✗": "bad", "D": "dev", "n/a": "na", "?": "unk", "declared": "dec"}

# Filters: by target and by verdict (a row shows when it has a cell of that verdict).  Inline,
# no network; the initial filter may come from the URL fragment (#target=..&verdict=..).
_JS = """
(function(){
  var fw=document.getElementById('f-target'),vd=document.getElementById('f-verdict');
  var rows=[].slice.call(document.querySelectorAll('#matrix tbody tr'));
  function apply(){
    var n=0;
    rows.forEach(function(r){
      var ok=(!fw.value||r.dataset.target===fw.value)&&
             (!vd.value||r.dataset.verdicts.split(' ').indexOf(vd.value)>=0);
      r.hidden=!ok; if(ok)n++;
    });
    [].slice.call(document.querySelectorAll('#summary tbody tr, #unclassified li')).forEach(function(r){
      r.hidden=!!fw.value&&r.dataset.target!==fw.value;
    });
    document.getElementById('shown').textContent=n+' of '+rows.length+' variants shown';
  }
  var q=new URLSearchParams(location.hash.slice(1));
  if(q.get('target'))fw.value=q.get('target');
  if(q.get('verdict'))vd.value=q.get('verdict');
  fw.addEventListener('change',apply);vd.addEventListener('change',apply);apply();
})();
"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _html_cell(c: Cell) -> str:
    full = "; ".join(x for x in (c.text, _age_text(c.age_days)) if x)
    more = _e(full)
    if c.link:
        more += f' <a href="{_e(c.link)}">shrink report</a>'
    defect = c.detail.get("defect")
    if defect:  # the ledger sits beside the page (results/defects.md)
        more += f' <a href="defects.md#{_e(defect.lower())}">defect {_e(defect)}</a>'
    short = _e(c.short) if c.verdict != "n/a" else ""
    return (f'<td class="{_CLASS[c.verdict]}" data-verdict="{_e(c.verdict)}" title="{_e(full)}">'
            f'<details><summary><span class="v">{_e(c.label)}</span> <span class="s">{short}'
            f'</span></summary><div class="more">{more}</div></details></td>')


def render_html(rows: list[Row], generated: str) -> str:
    props = "".join(f'<th title="{_e(PROPERTY_NAMES[p])}">{p}</th>' for p in PROPERTIES)
    targets = list(dict.fromkeys(r.target for r in rows))
    variants = {t: sum(r.target == t for r in rows) for t in targets}
    sums = []
    for target, per in summary(rows).items():
        tds = "".join("<td>" + "".join(
            f'<span class="{_CLASS[v]}">{_e(v)}&nbsp;{per[p][v]}</span>'
            for v in ORDER if per[p].get(v)) + "</td>" for p in PROPERTIES)
        sums.append(f'<tr data-target="{_e(target)}"><th class="t">{_e(target)}</th>'
                    f'<td class="sm">{variants[target]}</td>{tds}</tr>')
    body = []
    for row in rows:
        verdicts = " ".join(sorted({c.verdict for c in row.cells.values()}))
        opts = ", ".join(f"{k}={v}" for k, v in row.options.items())
        body.append(f'<tr data-target="{_e(row.target)}" data-verdicts="{_e(verdicts)}">'
                    f'<td class="t">{_e(row.target)}</td><td class="vr" title="{_e(opts)}">'
                    f'{_e(row.variant)}'
                    + (f'<br><small>{_e(row.shapes_text)}</small>' if row.shapes_text else "")
                    + '</td>'
                    + "".join(_html_cell(row.cells[p]) for p in PROPERTIES) + "</tr>")
    legend = ('<div class="legends" id="legend"><dl>'
              + "".join(f"<dt>{p}</dt><dd>{_e(PROPERTY_NAMES[p])}</dd>" for p in PROPERTIES)
              + "</dl><dl>"
              + "".join(f'<dt><span class="{_CLASS[v]}">{_e(v)}</span></dt><dd>{_e(t)}</dd>'
                        for v, t in VERDICTS.items()) + "</dl></div>")
    options = "".join(f'<option value="{_e(t)}">{_e(t)}</option>' for t in targets)
    voptions = "".join(f'<option value="{_e(v)}">{_e(v)}</option>' for v in ORDER)
    filters = (f'<div class="filters"><label>target <select id="f-target"><option value="">all'
               f'</option>{options}</select></label><label>with a cell <select id="f-verdict">'
               f'<option value="">any verdict</option>{voptions}</select></label>'
               f'<span id="shown"></span></div>')
    extra = ""
    unclassified = [(r, o) for r in rows for o in r.other]
    if unclassified:
        extra += ('<h2>Unclassified divergences (gaps in the model or an adapter)</h2>'
                  '<ul id="unclassified">'
                  + "".join(f'<li data-target="{_e(r.target)}">{_e(r.target)} [{_e(r.variant)}]: '
                            f'<a href="{_e(o)}">{_e(o)}</a></li>' for r, o in unclassified)
                  + "</ul>")
    if UNREADABLE:
        extra += ("<h2>Corpus entries that could not be read</h2><ul>"
                  + "".join(f"<li>{_e(e)}</li>" for e in UNREADABLE) + "</ul>")
    return ("<!doctype html><html lang=en><meta charset=utf-8>"
            '<meta name="viewport" content="width=device-width">'
            f"<title>resumefuzz conformance matrix</title><style>{_CSS}</style>"
            f"<h1>resumefuzz conformance matrix</h1><p>generated {_e(generated)}. "
            "Click a cell for its detail (or hover it).</p>"
            '<h2>Summary per framework</h2><table id="summary" class="sum"><thead><tr>'
            f'<th class="t">target</th><th class="sm">variants</th>{props}</tr></thead>'
            f"<tbody>{''.join(sums)}</tbody></table>"
            f"<h2>Legend</h2>{legend}<h2>Per variant</h2>{filters}"
            '<table id="matrix"><thead><tr><th class="t">target</th><th class="vr">variant</th>'
            f"{props}</tr></thead><tbody>{''.join(body)}</tbody></table>{extra}"
            f"<script>{_JS}</script></html>\n")


def render_json(rows: list[Row], generated: str) -> str:
    return json.dumps({
        "generated": generated,
        "columns": list(PROPERTIES),
        "min_exercised": evidence.MIN_EXERCISED,
        "summary": summary(rows),
        "rows": [{"target": r.target, "variant": r.variant, "options": r.options,
                  "age_days": r.age_days, "shapes": r.shapes,
                  "cells": {p: c.to_json() for p, c in r.cells.items()},
                  "unclassified": r.other} for r in rows],
        "unreadable": list(UNREADABLE),
    }, indent=2, ensure_ascii=False) + "\n"


def render(rows: list[Row], fmt: str) -> str:
    generated = evidence.now()
    if fmt == "md":
        return render_md(rows)
    if fmt == "html":
        return render_html(rows, generated)
    return render_json(rows, generated)


__all__ = ["PROPERTIES", "build", "render", "slug", "summary"]
