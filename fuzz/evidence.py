"""Campaign evidence: what was searched, per target and variant, for the matrix to read.

``results/<target>/<variant>.json`` (format ``resumefuzz-evidence``, version 1) holds the latest
campaign's numbers and the running totals, the variant's capabilities (what is ``n/a`` and why),
its documented deviations and intents, and the versions it ran at.  Written atomically.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

from adapters.protocol import OPERATIONS, atomic_write_text

from .corpus import slug, tool_versions
from .errors import UsageError

RESULTS_DIR = Path("results")
FORMAT, VERSION = "resumefuzz-evidence", 1


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()


def path_for(target: str, variant: str, root: Path = RESULTS_DIR) -> Path:
    return Path(root) / slug(target) / f"{slug(variant)}.json"


def record(adapter, variant, result, root: Path = RESULTS_DIR) -> Path:
    """Merge one variant's campaign result into its evidence file."""
    path = path_for(adapter.name, variant.name, root)
    old = load(path) if path.exists() else {}
    caps = adapter.capabilities(variant)
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "target": adapter.name,
        "variant": variant.name,
        "description": variant.description,
        "options": dict(variant.options),
        "updated": now(),
        "latest": {"examples": result.examples, "operations": result.operations,
                   "seconds": result.seconds,
                   "categories": sorted({f.category for f in result.findings})},
        "total_examples": old.get("total_examples", 0) + result.examples,
        "total_operations": old.get("total_operations", 0) + result.operations,
        "campaigns": old.get("campaigns", 0) + 1,
        "capabilities": {
            "operations": sorted(caps.operations),
            "missing": sorted(set(OPERATIONS) - set(caps.operations)),
            "crash_kinds": sorted(caps.crash_kinds),
            "tamper_hows": sorted(caps.tamper_hows),
            "bad_output": caps.bad_output,
            "forced_race": caps.forced_race,
            "not_expressible": dict(caps.not_expressible),
            "intents": dict(caps.intents),
        },
        "deviations": [{"category": d.category, "citation": d.citation, "scope": d.scope}
                       for d in adapter.deviations(variant)],
        "versions": {**tool_versions(), **dict(adapter.versions())},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return path


def load(path: Path) -> dict:
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not a readable evidence file: {exc}") from None
    if doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise UsageError(f"{path}: not {FORMAT} version {VERSION}")
    return doc


def load_all(root: Path = RESULTS_DIR) -> list[dict]:
    root = Path(root)
    return [load(p) for p in sorted(root.rglob("*.json"))] if root.exists() else []
