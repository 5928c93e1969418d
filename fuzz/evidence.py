"""Campaign evidence: what was searched, per target and variant, for the matrix to read.

``results/<target>/<variant>.json`` (format ``resumefuzz-evidence``, version 2; see
``docs/evidence-format.md``) holds the latest campaign's numbers and the running totals, the
operations that could have broken each property (``exercised``, counted by ``Exercise``), the
variant's capabilities (what is ``n/a`` and why), its documented deviations and intents, and the
versions it ran at.  Written atomically.  Version 1 files (no ``exercised``) still load: their
properties render ``?`` (not counted), never ``✓``.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from adapters.protocol import OPERATIONS
from adapters.files import atomic_write_text

from .corpus import slug, tool_versions
from .errors import UsageError

RESULTS_DIR = Path("results")
FORMAT, VERSION = "resumefuzz-evidence", 2
READS = (1, 2)  # versions ``load`` accepts (1: written before operations were counted)

# A property is ✓ only when at least this many operations that could have broken it ran on the
# variant (over all its campaigns); fewer is ``?``.  Five: one or two are luck, a handful of
# independently drawn attempts (each in its own example, with its own crash point and values)
# is the least a maintainer can read as "tried".
MIN_EXERCISED = 5

# The properties ``Exercise`` counts (FI is declared by the adapter, not exercised).
COUNTED = ("PC", "EO", "FD", "CV", "CO", "RD", "LV")
_RECOVERABLE = ("sigkill", "exception")  # ThreadModel.crash_kind values that are real crashes


class Exercise:
    """Counts, per property, the operations of a campaign that could have broken it.

    Fed by the machine's observer: ``example()`` when an example starts, ``op(op=..., observed=...,
    world=..., allowed=...)`` after each operation (``observed``: the target's Observation;
    ``world``: the reference world *before* the op).  Only ``op`` is required: without
    ``observed`` a crash point counts as fired, without ``world`` the thread history seen in this
    example stands in for the reference's (a gate counts as consumed once the thread was resumed).

    What counts (keys of ``counts[prop]``, so the evidence says what stands behind a ✓):

    - PC: every executing operation (``start``, ``resume``, ``recover``, ``fork``, ``race``,
      ``twin_recover``), by name;
    - EO, LV: a crash point that fired (``<kind>/<phase>``), followed by a ``recover`` or
      ``twin_recover`` of that thread;
    - FD: a ``fork`` of a gate its source thread had consumed already;
    - CV: a ``tamper`` followed by an executing op on that thread, by ``how`` and, for a
      ``forged`` one, the part it edited (``tamper:forged/done``, ``tamper:forged/answer``,
      ``tamper:forged/pending``; ``tamper:forged`` without a part), and every executing op
      carrying a ``BadOutput``;
    - CO: a ``race`` of k racers on an interrupted, untampered thread (``race of k``), a
      ``resume`` of a thread that had consumed a gate already (sequential double consume), and
      every ``stale_resume`` (``stale-handle resume``: its gate was consumed, by precondition);
    - RD: a ``twin_recover`` of a crashed thread.
    """

    def __init__(self):
        self.counts: dict = {p: Counter() for p in COUNTED}
        # Examples per workflow kind: ``chain``, or each §7 feature its shape uses
        # (``Shape.features``): what a row's evidence says of the shapes it ran.
        self.shapes: Counter = Counter()
        self.example()

    def example(self, workflow=None) -> None:
        if workflow is not None:
            shape = getattr(workflow, "shape", None)
            self.shapes.update(["chain"] if shape is None else sorted(shape.features()))
        self._crashed: dict = {}  # thread -> "<kind>/<phase>" of the crash it has not recovered
        self._tampered: dict = {}  # thread -> how, until an executing op reads it
        self._resumed: set = set()  # threads resumed (or forked from) in this example

    def op(self, op=None, observed=None, world=None, **_ignored) -> None:
        if op is None:
            return
        name = getattr(op, "name", "")
        thread = getattr(op, "thread", None)
        before = world.get(thread) if world is not None and thread is not None else None
        outcome = getattr(observed, "outcome", None)
        if getattr(op, "runs", False):
            self.counts["PC"][name] += 1
            if getattr(op, "bad_output", None):
                self.counts["CV"]["bad_output"] += 1
            if thread in self._tampered:
                self.counts["CV"][f"tamper:{self._tampered.pop(thread)}"] += 1
        if name in ("recover", "twin_recover"):
            crash = self._crashed.pop(thread, None)
            if before is not None:  # the reference knows whether the thread needs recovery
                kind = getattr(before, "crash_kind", None)
                crash = (crash or f"{kind}/?") if kind in _RECOVERABLE else None
            if crash is not None:
                self.counts["EO"][crash] += 1
                self.counts["LV"][crash] += 1
                if name == "twin_recover":
                    self.counts["RD"]["twin_recover"] += 1
        elif name == "tamper":
            self._tampered[thread] = _tamper_kind(op)
        elif name == "fork":
            if self._consumed(before, thread, getattr(op, "gate", None)):
                self.counts["FD"]["fork of a consumed gate"] += 1
            self._resumed.add(getattr(op, "new_thread", None))
        elif name == "race":
            racers = len(getattr(op, "values", ()))
            reached = outcome is None or "stuck" not in str(outcome).split("|")
            if before is not None:
                reached = reached and not before.tampered and before.durable.pending is not None
            if reached:
                self.counts["CO"][f"race of {racers}"] += 1
            self._resumed.add(thread)
        elif name == "stale_resume":
            self.counts["CO"]["stale-handle resume"] += 1
        elif name == "resume":
            if self._consumed(before, thread, None):
                self.counts["CO"]["resume after a consume"] += 1
            self._resumed.add(thread)
        crash = getattr(op, "crash", None)
        if crash is not None and (observed is None or outcome == "crashed"):
            died = getattr(op, "new_thread", None) if name == "fork" else thread
            self._crashed[died] = f"{crash.kind}/{crash.phase}"

    def _consumed(self, before, thread, gate) -> bool:
        """Had ``thread`` consumed ``gate`` (any gate when None) before this op?"""
        if before is None:
            return thread in self._resumed
        answers = dict(before.durable.answers)
        return bool(answers) if gate is None else gate in answers

    def to_json(self) -> dict:
        return {p: dict(sorted(c.items())) for p, c in self.counts.items()}


def _tamper_kind(op) -> str:
    """``corrupt``, ``invalid``, ``forged`` or ``forged/<part>`` (an answer's gate left out: the
    part is what a store may protect or skip, not which gate)."""
    how, part = getattr(op, "how", "?"), getattr(op, "part", None)
    return how if part is None else f"{how}/{part.split(':', 1)[0]}"


def merge_exercised(old: dict | None, new: dict | None) -> dict:
    """Running totals of two ``exercised`` maps (``{prop: {what: count}}``)."""
    out = {p: dict(v) for p, v in (old or {}).items()}
    for prop, counts in (new or {}).items():
        mine = out.setdefault(prop, {})
        for what, n in counts.items():
            mine[what] = mine.get(what, 0) + n
    return {p: dict(sorted(v.items())) for p, v in sorted(out.items())}


def expressible(what: str, caps: dict) -> bool:
    """Can a variant with these capabilities (the evidence's ``capabilities`` map) still exercise
    a counted key?  No for a tamper ``how``, a crash kind, ``bad_output`` or an operation the
    variant no longer declares: counts of it are of an operation the project has since judged
    not to reach the framework (``corrupt`` on a store whose bytes are the application's own),
    and a ✓ must not stand on them."""
    missing = set(caps.get("missing", ()))
    if what.startswith("tamper:"):
        return "tamper" not in missing and what[7:].split("/", 1)[0] in caps.get("tamper_hows", ())
    if what == "bad_output":
        return bool(caps.get("bad_output"))
    if "/" in what:  # <kind>/<phase>, EO and LV
        return what.split("/", 1)[0] in caps.get("crash_kinds", ())
    if what.startswith("race of "):
        return "race" not in missing
    if what == "stale-handle resume":
        return "stale_resume" not in missing
    return what not in missing  # PC's operation names, RD's twin_recover; the rest always


def withdraw(counts: dict, caps: dict) -> tuple[dict, dict]:
    """``counts`` (``{prop: {what: n}}``) split into what ``caps`` still expresses and what it
    does not (``expressible``), both sorted as ``merge_exercised`` sorts."""
    kept, gone = {prop: {} for prop in counts}, {}
    for prop, whats in counts.items():
        for what, n in whats.items():
            side = kept if expressible(what, caps) else gone
            side.setdefault(prop, {})[what] = n
    return merge_exercised(None, kept), merge_exercised(None, gone)


def exercised_total(doc: dict, prop: str) -> int | None:
    """How many operations that could break ``prop`` the evidence counts; None: not counted."""
    counts = doc.get("exercised")
    if counts is None:
        return None
    return sum(counts.get(prop, {}).values())


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()


def path_for(target: str, variant: str, root: Path = RESULTS_DIR) -> Path:
    return Path(root) / slug(target) / f"{slug(variant)}.json"


def capabilities_of(adapter, variant) -> dict:
    """The evidence's ``capabilities`` map of ``variant`` as the adapter declares it now."""
    caps = adapter.capabilities(variant)
    return {
        "operations": sorted(op for op in OPERATIONS if caps.expresses(op)),
        "missing": sorted(op for op in OPERATIONS if not caps.expresses(op)),
        "crash_kinds": sorted(caps.crash_kinds),
        "tamper_hows": sorted(caps.tamper_hows),
        "bad_output": caps.bad_output,
        "forced_race": caps.forced_race,
        "not_expressible": dict(caps.not_expressible),
        "stale_handle": caps.stale_handle,
        "intents": dict(caps.intents),
    }


def redeclared(doc: dict, adapter, variant) -> dict:
    """``doc`` under the variant's capabilities and deviations as declared now, its counts of
    what the variant no longer declares moved to ``withdrawn``: what ``record`` starts every
    campaign from, and what a declaration made since (an n/a, docs/contract.md §5 "no mechanism, no
    ✗") is applied with to committed evidence without a campaign, so that no ✓ stands on
    operations the project no longer judges."""
    capabilities = capabilities_of(adapter, variant)
    exercised, withdrawn = withdraw(doc.get("exercised") or {}, capabilities)
    withdrawn = merge_exercised(doc.get("withdrawn"), withdrawn)
    out = {**doc, "exercised": exercised, "capabilities": capabilities,
           "deviations": [{"category": d.category, "citation": d.citation, "scope": d.scope}
                          for d in adapter.deviations(variant)]}
    if withdrawn:
        out["withdrawn"] = withdrawn
    return out


def record(adapter, variant, result, root: Path = RESULTS_DIR) -> Path:
    """Merge one variant's campaign result into its evidence file."""
    path = path_for(adapter.name, variant.name, root)
    # Totals of what the variant no longer declares (a capability withdrawn since they were
    # counted) leave ``exercised`` for ``withdrawn`` (``redeclared``): kept, so the file says
    # what was dropped and why a count fell, but never behind a ✓.
    old = redeclared(load(path) if path.exists() else {}, adapter, variant)
    capabilities = old["capabilities"]
    exercised, withdrawn = withdraw(
        merge_exercised(old.get("exercised"), _exercised(result)), capabilities)
    withdrawn = merge_exercised(old.get("withdrawn"), withdrawn)
    updated = now()
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "target": adapter.name,
        "variant": variant.name,
        "description": variant.description,
        "options": dict(variant.options),
        "updated": updated,
        "latest": {"examples": result.examples, "operations": result.operations,
                   "seconds": result.seconds,
                   "categories": sorted({f.category for f in result.findings}),
                   "exercised": _exercised(result), "shapes": _shapes(result)},
        "total_examples": old.get("total_examples", 0) + result.examples,
        "total_operations": old.get("total_operations", 0) + result.operations,
        # Counted only since version 2: totals of version 1 campaigns are not known, so a file
        # upgraded from version 1 counts from its first version 2 campaign on.
        "exercised": exercised,
        **({"withdrawn": withdrawn} if withdrawn else {}),
        # Examples per workflow kind (``Exercise.shapes``), since shapes were drawn.
        "shapes": shape_counts(old.get("shapes"), _shapes(result)),
        "campaigns": old.get("campaigns", 0) + 1,
        # One id per campaign, so that ``merge`` can tell a copy of this file from other
        # campaigns of the same variant (a scratch directory, another machine, a worktree).
        "campaign_ids": campaign_ids(old) + [f"{updated}#{uuid.uuid4().hex[:8]}"],
        "capabilities": capabilities,
        "deviations": old["deviations"],
        "versions": {**tool_versions(), **dict(adapter.versions())},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return path


def campaign_ids(doc: dict) -> list:
    """The campaigns an evidence file counts, by id.  A file written before ids were recorded
    stands for its campaigns with one id made of what it says (target, variant, totals, time of
    its last write): a copy of it, and a file a later campaign wrote on top of such a copy,
    carry that same id."""
    if "campaign_ids" in doc:
        return list(doc["campaign_ids"])
    if not doc.get("campaigns"):
        return []
    said = [doc.get(k) for k in ("target", "variant", "total_examples", "total_operations",
                                 "campaigns", "updated")]
    digest = hashlib.sha256(json.dumps(said).encode()).hexdigest()[:12]
    return [f"before-ids:{digest}"]


@dataclass(frozen=True)
class Merge:
    """What ``merge`` makes of one source file: ``doc`` to write (None: nothing to write),
    ``how`` (``"new"``, ``"added"``, ``"replaced"``, ``"already"``) and the campaigns it adds."""

    doc: dict | None
    how: str
    added: int = 0


def merge(dest: dict | None, src: dict) -> Merge:
    """The evidence of ``dest`` and ``src`` (one target and variant) as one file.

    Campaigns are told apart by ``campaign_ids``: those of ``src`` that ``dest`` has already
    are not counted twice.  Disjoint: totals and counts add up, and the newer file (by
    ``updated``) gives ``latest``, the capabilities (counts they no longer express go to
    ``withdrawn``), the deviations and the versions.  ``src`` holding every campaign of
    ``dest`` and more (a copy of it that campaigns then added to): ``src`` replaces it.  Each
    holding campaigns the other lacks *and* sharing some: their counts cannot be separated, and
    ``UsageError`` says so before anything is written."""
    theirs = campaign_ids(src)
    if dest is None:
        return Merge({**src, "campaign_ids": theirs}, "new", len(theirs))
    if (dest.get("target"), dest.get("variant")) != (src.get("target"), src.get("variant")):
        raise UsageError(f"evidence of {src.get('target')}/{src.get('variant')} cannot be merged "
                         f"into that of {dest.get('target')}/{dest.get('variant')}")
    mine = campaign_ids(dest)
    new = [c for c in theirs if c not in set(mine)]
    if not new:
        return Merge(None, "already")
    if set(mine) <= set(theirs):
        return Merge({**src, "campaign_ids": theirs}, "replaced", len(new))
    if set(mine) & set(theirs):
        raise UsageError(
            f"{src.get('target')}/{src.get('variant')}: the two files share "
            f"{len(set(mine) & set(theirs))} campaign(s) and each has campaigns the other lacks; "
            "their counts cannot be separated")
    # A tie (the times are to the second) goes to the source: the file being merged in.
    newer = src if src.get("updated", "") >= dest.get("updated", "") else dest
    caps = newer.get("capabilities", {})
    exercised, gone = withdraw(merge_exercised(dest.get("exercised"), src.get("exercised")), caps)
    withdrawn = merge_exercised(merge_exercised(dest.get("withdrawn"), src.get("withdrawn")), gone)
    doc = {
        **newer,
        "version": VERSION,
        "total_examples": dest.get("total_examples", 0) + src.get("total_examples", 0),
        "total_operations": dest.get("total_operations", 0) + src.get("total_operations", 0),
        "exercised": exercised,
        "shapes": shape_counts(dest.get("shapes"), src.get("shapes")),
        "campaigns": dest.get("campaigns", 0) + src.get("campaigns", 0),
        "campaign_ids": mine + new,
    }
    doc.pop("withdrawn", None)
    if withdrawn:
        doc["withdrawn"] = withdrawn
    return Merge(doc, "added", len(new))


def evidence_files(paths) -> list[tuple[Path, dict]]:
    """The evidence files named by ``paths`` (files, or directories searched recursively), each
    with its document, all loaded before anything is written (``UsageError`` for a path that does
    not exist, an empty directory, or a file that is not evidence)."""
    found = []
    for p in map(Path, paths):
        if not p.exists():
            raise UsageError(f"{p}: no such file or directory")
        # A directory: its evidence files, never the defect ledger's links (UPSTREAM_NAME).
        files = (sorted(f for f in p.rglob("*.json") if f.name != UPSTREAM_NAME)
                 if p.is_dir() else [p])
        if p.is_dir() and not files:
            raise UsageError(f"{p}: no evidence files in it")
        found += files
    return [(f, load(f)) for f in found]


def merge_into(paths, root: Path = RESULTS_DIR, *, dry_run: bool = False) -> list:
    """Merge the evidence files under ``paths`` into ``root`` (``resumefuzz merge-evidence``).

    Every source is read and every merge planned before the first write, so a bad file or an
    overlap that cannot be merged leaves ``root`` as it was.  Returns ``(source, destination,
    Merge)`` per source file, in order; several sources of one variant merge one after the
    other."""
    if Path(root).exists() and not Path(root).is_dir():
        raise UsageError(f"{root}: not a directory (the evidence directory to merge into)")
    plans, docs = [], {}
    for source, src in evidence_files(paths):
        dest_path = path_for(src["target"], src["variant"], root)
        if dest_path.resolve() == source.resolve():
            raise UsageError(f"{source}: is the destination file itself")
        if dest_path not in docs:
            docs[dest_path] = load(dest_path) if dest_path.exists() else None
        try:
            planned = merge(docs[dest_path], src)
        except UsageError as exc:
            raise UsageError(f"{source}: {exc}") from None
        if planned.doc is not None:
            docs[dest_path] = planned.doc
        plans.append((source, dest_path, planned))
    if not dry_run:
        for dest_path in {d for _, d, m in plans if m.doc is not None}:
            dest_path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(dest_path,
                              json.dumps(docs[dest_path], indent=2, ensure_ascii=False) + "\n")
    return plans


def shape_counts(*counts) -> dict:
    """The sum of ``shapes`` maps (``{"chain": n, "parallel": k, ...}``), sorted."""
    total: Counter = Counter()
    for c in counts:
        total.update(c or {})
    return dict(sorted(total.items()))


def _shapes(result) -> dict:
    counts = getattr(result, "exercised", None)
    return shape_counts(counts.shapes) if isinstance(counts, Exercise) else {}


def _exercised(result) -> dict:
    counts = getattr(result, "exercised", None)
    if isinstance(counts, Exercise):
        return counts.to_json()
    return merge_exercised(None, counts or {})


def load(path: Path) -> dict:
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not a readable evidence file: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") not in READS:
        raise UsageError(f"{path}: not {FORMAT} version {' or '.join(map(str, READS))}")
    return doc


#: The defect ledger's upstream links (``fuzz.defects``), kept beside the evidence in results/.
UPSTREAM_NAME = "upstream.json"


def load_all(root: Path = RESULTS_DIR) -> list[dict]:
    """Every evidence file under ``root``: ``<target>/<variant>.json`` (``path_for``); a file at
    the top (``upstream.json``, the defect ledger's links) is not evidence."""
    root = Path(root)
    return [load(p) for p in sorted(root.glob("*/*.json"))] if root.exists() else []
