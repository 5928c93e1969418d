"""The reproduction-script table, read from the corpus: how many entries carry a checked
script, how many of those reproduce, and how long they are (a script reads as a maintainer
would write it: its length is reported, never held to a budget).

    python benchmarks/script_stats.py [CORPUS_DIR]

Reads only the JSON entries (``finding.script``: ``checked``, ``lines``, ``runs``,
``reproduced``, written by ``resumefuzz report --verify N``; ``status``); imports no framework
and nothing of ours, so it runs with any Python 3.11.  Entries fuzzed on a third-party store
(``versions`` ``store-factory``; their scripts are regenerated in the store's own tox
environment) get a row of their own per framework, ``<framework> (stores)``.

Lines are counted apart for scripts with a process of their own to run (a SIGKILL crash point,
a ``race`` or a ``twin_recover``).  Line counts are of checked scripts only; an entry without
one is counted as missing, apart for entries recorded ``FIXED``: their recorded observation is
one the contract allows, so no check can tell a defect apart there.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from statistics import median

def is_hard(entry: dict) -> bool:
    for op in entry["operations"]:
        if op["op"] in ("race", "twin_recover"):
            return True
        if (op.get("crash") or {}).get("kind") == "sigkill":
            return True
    return False


def rows(corpus: Path) -> dict:
    out: dict = {}
    for path in sorted(corpus.rglob("*.json")):
        entry = json.loads(path.read_text())
        if entry.get("target", "").startswith(("reference", "mutant:")):
            continue
        target = entry["target"] + (" (stores)" if "store-factory" in entry.get("versions", {})
                                    else "")
        script = (entry.get("finding") or {}).get("script") or {}
        row = out.setdefault(target, {"entries": 0, "checked": 0, "reproduce": 0, "failed": 0,
                                      "fixed": 0, "fixed_quiet": 0, "always": 0,
                                      "soft": [], "hard": [],
                                      "missing": {"FAILED": 0, "FIXED": 0}})
        row["entries"] += 1
        if not script.get("checked"):
            # A FIXED entry's recorded observation is one the contract allows: no aspect of it
            # tells a defect apart, so it can have no checked script; a FAILED one still could.
            row["missing"]["FIXED" if entry.get("status") == "FIXED" else "FAILED"] += 1
            continue
        row["checked"] += 1
        k, n = script.get("reproduced", 0), script.get("runs", 0)
        # A FIXED entry's replay matches the reference now: its script, which checks the
        # recorded defect, should exit 0 (k = 0); a FAILED one's should show it (k > 0).
        if entry.get("status") == "FIXED":
            row["fixed"] += 1
            row["fixed_quiet"] += n > 0 and k == 0
        else:
            row["failed"] += 1
            row["reproduce"] += k > 0
            row["always"] += n > 0 and k == n
        row["hard" if is_hard(entry) else "soft"].append(script["lines"])
    return out


def _median(xs: list) -> str:
    return f"{median(xs):g}" if xs else "-"


def table(out: dict) -> str:
    lines = ["| framework | entries | checked scripts | without one: FAILED, FIXED "
             "| FAILED: reproduce (k>0) / checked, all k=n | FIXED: exit 0 (k=0) / checked "
             "| median lines "
             "| without SIGKILL/race/twin: median | with: median |",
             "|---|---|---|---|---|---|---|---|---|"]
    for target, r in sorted(out.items()):
        soft, hard = r["soft"], r["hard"]
        lines.append(
            f"| {target} | {r['entries']} | {r['checked']} "
            f"| {r['missing']['FAILED']}, {r['missing']['FIXED']} "
            f"| {r['reproduce']}/{r['failed']}, {r['always']} "
            f"| {r['fixed_quiet']}/{r['fixed']} "
            f"| {_median(soft + hard)} "
            f"| {_median(soft)} | {_median(hard)} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    corpus = Path(argv[0]) if argv else Path(__file__).resolve().parents[1] / "corpus"
    if not corpus.is_dir():
        print(f"script_stats: {corpus} is not a directory", file=sys.stderr)
        return 2
    print(table(rows(corpus)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
