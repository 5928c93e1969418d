"""Shrink reports: a Markdown page per failure, fit to paste into a framework's issue tracker.

``shrink_reports/<target>/<variant>/<Category>-<fingerprint>.md``: the numbered operations,
expected versus observed per operation, the property broken, the category and its switch in the
paper's TLA+ model, versions, the ``resumefuzz replay`` line, and a standalone script written by
the adapter with the framework's own API alone.
"""

from __future__ import annotations

import json
from pathlib import Path

from adapters.protocol import atomic_write_text
from refmodel import CATEGORY_INFO

from .corpus import slug
from .trace import Trace

REPORTS_DIR = Path("shrink_reports")


def _obs(o) -> str:
    if o is None:
        return "-"
    effects = ", ".join(f"e{t}({v})" if v is not None else f"e{t}" for _, t, v in o.effects) or "none"
    state = "not compared (tampered)" if o.state is None else json.dumps(o.state.to_json())
    text = f"**{o.outcome}**; effects: {effects}; state: `{state}`"
    if o.twin is not None:
        text += f"<br>twin copy: {_obs(o.twin)}"
    return text


def _op(op) -> str:
    args = {k: v for k, v in op.to_json().items() if k not in ("op",) and v not in (None, False)}
    return f"`{op.name}({', '.join(f'{k}={v!r}' for k, v in args.items())})`"


def render(trace: Trace, corpus_path: Path, script: str | None) -> str:
    f = trace.finding
    info = CATEGORY_INFO[f.category]
    verdict = "documented deviation (D)" if f.verdict == "D" else "defect (✗)"
    lines = [
        f"# {f.category} in {trace.target} [{trace.variant}]",
        "",
        f"- **Category**: `{f.category}` (switch {info.paper_switch} of the paper's TLA+ model)",
        f"- **Property broken**: {f.property}",
        f"- **Verdict**: {verdict}" + (f" — {f.citation}" if f.citation else ""),
        f"- **Why**: {f.detail}",
        *([f"- **Reproduced**: {f.reproduced['k']} of {f.reproduced['n']} replays right after "
           "the campaign" + (" (it depends on timing: its regression test replays it in trials)"
                             if f.rate else "")]
          if f.reproduced is not None and not f.never_reproduced else []),
        f"- **Workflow**: {trace.workflow.n} tasks, gates {sorted(trace.workflow.gates)}, "
        f"values {list(trace.workflow.values)}",
        f"- **Versions**: " + ", ".join(f"{k} {v}" for k, v in sorted(trace.versions.items())),
        f"- **Fingerprint**: `{trace.fingerprint}` (found {trace.created})",
        "",
        *([f"> **Never came back**: 0 of {f.reproduced['n']} replays right after the campaign "
           "reproduced it, so it was dropped from the corpus; this report is its only record.",
           ""] if f.never_reproduced else []),
        "## Minimal trace",
        "",
        "| # | operation | expected (reference) | observed |",
        "|---|---|---|---|",
    ]
    for i, op in enumerate(trace.operations):
        expected = trace.expected[i] if i < len(trace.expected) else None
        observed = trace.observations[i] if i < len(trace.observations) else None
        mark = " ⟵ diverges" if i == f.step else ""
        lines.append(f"| {i + 1} | {_op(op)}{mark} | {_obs(expected)} | {_obs(observed)} |")
    lines += [
        "",
        "Where the contract allows several outcomes, *expected* shows the reference's canonical",
        "one; the observation diverges when it is none of the allowed ones (CONTRACT.md §3).",
        "",
        "## Replay",
        "",
        *(["Not in the corpus (it never came back on replay)."] if f.never_reproduced else
          ["```", f"resumefuzz replay {corpus_path}", "```"]),
        "",
        "## Standalone reproduction (the framework's own API, no resumefuzz)",
        "",
    ]
    if script:
        lines += ["```python", script.rstrip(), "```"]
    else:
        lines += ["The adapter provides no standalone script for this variant."]
    return "\n".join(lines) + "\n"


def report_path(trace: Trace, root: Path = REPORTS_DIR) -> Path:
    name = f"{trace.finding.category}-{trace.fingerprint}.md"
    return Path(root) / slug(trace.target) / slug(trace.variant) / name


def write(trace: Trace, corpus_path: Path, script: str | None, root: Path = REPORTS_DIR) -> Path:
    path = report_path(trace, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, render(trace, corpus_path, script))
    return path
