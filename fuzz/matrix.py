"""The conformance matrix: one row per target and variant, one column per property.

Built from recorded campaign evidence (``results/``, see ``fuzz/evidence.py``) and the corpus.
A cell is

- ``✗`` a corpus entry of that property still fails (linked to its shrink report);
- ``D`` it fails, but only as a weakening the framework documents (with the citation);
- ``n/a`` the variant cannot express what the property needs (with the reason);
- ``✓`` searched and nothing found (with the examples and operations behind it);
- ``?`` not searched yet.

Each cell says how old its evidence is.  FI is read from the adapter's declared intents.
"""

from __future__ import annotations

import datetime
import html
import json
from dataclasses import dataclass, field
from pathlib import Path

from refmodel import CATEGORY_INFO

from . import evidence
from .corpus import CORPUS_DIR, entries, slug
from .errors import ResumefuzzError
from .report import REPORTS_DIR, report_path
from .trace import load_trace

PROPERTIES = ("PC", "EO", "FD", "CV", "CO", "RD", "FI", "LV")

# What a property needs the variant to express, and what to say when it cannot.
NEEDS = {
    "FD": (lambda c: "fork" in c["operations"], "fork"),
    "CV": (lambda c: "tamper" in c["operations"] or c["bad_output"], "tamper"),
    "CO": (lambda c: "resume" in c["operations"] or "race" in c["operations"], "resume"),
    "RD": (lambda c: "twin_recover" in c["operations"], "twin_recover"),
    "LV": (lambda c: "recover" in c["operations"] and c["crash_kinds"], "recover"),
}


@dataclass
class Cell:
    verdict: str  # ✓ ✗ D n/a ?
    text: str = ""
    link: str = ""
    age_days: float | None = None
    detail: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"verdict": self.verdict, "text": self.text, "link": self.link,
                "age_days": self.age_days, **self.detail}


@dataclass
class Row:
    target: str
    variant: str
    options: dict
    cells: dict
    other: list  # Unclassified findings: gaps to report, never hidden


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
        findings.setdefault((trace.target, trace.variant), []).append((path, trace))
    keys = sorted(set(docs) | set(findings))
    if targets:
        keys = [k for k in keys if k[0] in targets]
    rows = []
    for key in keys:
        doc = docs.get(key)
        caps = doc["capabilities"] if doc else None
        rows.append(_row(key, doc, caps, findings.get(key, []), now, reports_dir))
    return rows


def _row(key, doc, caps, found, now, reports_dir) -> Row:
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
    return Row(target, variant, dict(doc["options"]) if doc else {}, cells, other)


def _cell(prop, doc, caps, traces, now, reports_dir) -> Cell:
    defects = [t for t in traces if t.finding.verdict != "D"]
    if defects:
        t = min(defects, key=lambda t: len(t.operations))
        return Cell("✗", f"{t.finding.category} ({len(t.operations)} ops)",
                    str(report_path(t, reports_dir)), _age(t.created, now),
                    {"category": t.finding.category})
    if traces:
        t = traces[0]
        return Cell("D", f"{t.finding.category}: {t.finding.citation}",
                    str(report_path(t, reports_dir)), _age(t.created, now),
                    {"category": t.finding.category, "citation": t.finding.citation})
    if caps is None:
        return Cell("?", "not searched")
    age = _age(doc["updated"], now)
    if prop == "FI":
        intents = caps["intents"]
        if "indistinguishable" in intents.values():
            why = caps["not_expressible"].get("fork_retry_intent", "the API cannot say FORK or RETRY")
            return Cell("✗", f"no discriminator: {why}", age_days=age, detail={"intents": intents})
        return Cell("✓", "declared: " + ", ".join(f"{k}={v}" for k, v in intents.items()),
                    age_days=age, detail={"intents": intents})
    if prop in NEEDS:
        ok, op = NEEDS[prop]
        if not ok(caps):
            reason = caps["not_expressible"].get(op, f"{op} is not expressible")
            return Cell("n/a", reason, age_days=age)
    return Cell("✓", f"{doc['total_examples']:,} examples, {doc['total_operations']:,} ops",
                age_days=age, detail={"examples": doc["total_examples"],
                                      "operations": doc["total_operations"]})


# -- rendering ---------------------------------------------------------------------------------


def _age_text(days) -> str:
    if days is None:
        return ""
    return "today" if days < 1 else f"{days:.0f}d old"


def render_md(rows: list[Row]) -> str:
    lines = ["| target | variant | " + " | ".join(PROPERTIES) + " |",
             "|---|---|" + "---|" * len(PROPERTIES)]
    for row in rows:
        cells = []
        for prop in PROPERTIES:
            c = row.cells[prop]
            body = f"[{c.verdict}]({c.link})" if c.link else c.verdict
            note = "; ".join(x for x in (c.text, _age_text(c.age_days)) if x)
            cells.append(f"{body} <sub>{note}</sub>" if note else body)
        lines.append(f"| {row.target} | {row.variant} | " + " | ".join(cells) + " |")
    unclassified = [(r, o) for r in rows for o in r.other]
    if unclassified:
        lines += ["", "Unclassified divergences (gaps in the model or an adapter):"]
        lines += [f"- {r.target} [{r.variant}]: [{o}]({o})" for r, o in unclassified]
    if UNREADABLE:
        lines += ["", "Corpus entries that could not be read (not counted above):"]
        lines += [f"- {e}" for e in UNREADABLE]
    return "\n".join(lines) + "\n"


_CSS = """body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.3em .5em;vertical-align:top;font-size:.9em}
.v{font-size:1.2em;font-weight:bold}.ok{background:#e8f6e8}.bad{background:#fbe3e3}
.dev{background:#fff4d6}.na{background:#eee;color:#666}.unk{background:#fff}
small{color:#555;display:block}"""
_CLASS = {"✓": "ok", "✗": "bad", "D": "dev", "n/a": "na", "?": "unk"}


def render_html(rows: list[Row], generated: str) -> str:
    head = "".join(f"<th>{p}</th>" for p in PROPERTIES)
    body = []
    for row in rows:
        tds = []
        for prop in PROPERTIES:
            c = row.cells[prop]
            v = html.escape(c.verdict)
            v = f'<a href="{html.escape(c.link)}">{v}</a>' if c.link else v
            note = html.escape("; ".join(x for x in (c.text, _age_text(c.age_days)) if x))
            tds.append(f'<td class="{_CLASS[c.verdict]}"><span class="v">{v}</span>'
                       f"<small>{note}</small></td>")
        body.append(f"<tr><th>{html.escape(row.target)}</th><td>{html.escape(row.variant)}</td>"
                    + "".join(tds) + "</tr>")
    legend = ("✓ searched, nothing found · ✗ defect (links to the shrink report) · "
              "D documented deviation · n/a not expressible · ? not searched")
    return (f"<!doctype html><meta charset=utf-8><title>resumefuzz conformance matrix</title>"
            f"<style>{_CSS}</style><h1>resumefuzz conformance matrix</h1>"
            f"<p>{html.escape(legend)}</p><p>generated {html.escape(generated)}</p>"
            f"<table><tr><th>target</th><th>variant</th>{head}</tr>{''.join(body)}</table>"
            + ("<h2>Corpus entries that could not be read</h2><ul>"
               + "".join(f"<li>{html.escape(e)}</li>" for e in UNREADABLE) + "</ul>"
               if UNREADABLE else "") + "\n")


def render_json(rows: list[Row], generated: str) -> str:
    return json.dumps({
        "generated": generated,
        "columns": list(PROPERTIES),
        "rows": [{"target": r.target, "variant": r.variant, "options": r.options,
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


__all__ = ["PROPERTIES", "build", "render", "slug"]
