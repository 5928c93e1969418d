"""The regression corpus: one versioned JSON trace per shrunk failure, written atomically.

Layout: ``corpus/<target>/<variant>/<Category>-<fingerprint>.json``.  The fingerprint is
``sha256(category | target | variant | trace hash)[:12]``, where the trace hash covers the
workflow and the operations: the same minimal failure found twice is one file.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import platform
from importlib import metadata
from pathlib import Path

from refmodel import CATEGORY_INFO

from .errors import UsageError
from .rate import Rate
from .trace import Finding, Trace, dump_trace, load_trace

CORPUS_DIR = Path("corpus")


def trials_for(reproduced: Rate | None) -> int:
    """Replays that show a finding recorded as reproduced k of n times at least once, but with
    chance ``rate.FALSE_ALARM`` (at most ``rate.MAX_TRIALS``: ``Rate.trials``); 1 for a finding that
    reproduced every time.  The regression tests and the nightly replay judge a
    timing-dependent entry by these."""
    return 1 if reproduced is None else reproduced.trials()


def slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def trace_hash(trace: Trace) -> str:
    doc = {"workflow": trace.workflow.to_json(), "operations": [o.to_json() for o in trace.operations]}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def fingerprint(category: str, trace: Trace) -> str:
    key = f"{category}|{trace.target}|{trace.variant}|{trace_hash(trace)}"
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def tool_versions() -> dict:
    out = {"python": platform.python_version()}
    for dist in ("resumefuzz", "hypothesis"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "unknown"
    return out


def entry_from_failure(failure, target: str, variant: str, workflow, versions: dict) -> Trace:
    """The corpus entry for a (shrunk) failure raised by the machine."""
    ops = tuple(op for op, _, _ in failure.history)
    observed = tuple(o for _, o, _ in failure.history)
    expected = tuple(allowed[0] for _, _, allowed in failure.history)
    divergence = failure.divergence
    finding = Finding(divergence.category, CATEGORY_INFO[divergence.category].breaks,
                      len(ops) - 1, divergence.detail, failure.verdict, failure.citation,
                      owner=failure.owner)
    trace = Trace(workflow, ops, target, variant, observed, expected, finding, "FAILED",
                  {**tool_versions(), **versions})
    created = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
    return trace.with_(fingerprint=fingerprint(divergence.category, trace), created=created)


def entry_path(trace: Trace, root: Path = CORPUS_DIR) -> Path:
    name = f"{trace.finding.category}-{trace.fingerprint}.json"
    return Path(root) / slug(trace.target) / slug(trace.variant) / name


def save(trace: Trace, root: Path = CORPUS_DIR) -> Path:
    """Write the entry (atomically); an existing entry of the same fingerprint is kept as is."""
    path = entry_path(trace, root)
    if not path.exists():
        dump_trace(trace, path)
    return path


def entries(paths: list[Path] | None = None, root: Path = CORPUS_DIR) -> list[Path]:
    """Every ``*.json`` under the given files and directories (default: the corpus)."""
    if not paths and not Path(root).exists():
        return []
    out = []
    for p in map(Path, paths or [root]):
        out += sorted(p.rglob("*.json")) if p.is_dir() else [p]
    return out


def read_entries(paths: list | None = None, root: Path = CORPUS_DIR, *,
                 required: bool = True) -> list[tuple[Path, Trace]]:
    """Every entry under ``paths`` (files or directories; default ``root``), each read and
    validated, before a command does any work with one: a path that does not exist, a file that
    is not UTF-8 JSON or not a trace (one in a directory too) is a ``UsageError`` naming it, and so
    is finding no entry at all when ``required``.  A command that read entries one at a time
    would stop with a traceback, or an ERROR row, half-way through what it writes; reading them
    all first keeps "bad input: one line, exit 2, nothing written".  Entries are data: read,
    never executed."""
    for p in paths or ():
        if not Path(p).exists():
            raise UsageError(f"no such file or folder: {p}")
    found = entries([Path(p) for p in paths] if paths else None, root)
    if required and not found:
        where = ", ".join(map(str, paths)) if paths else f"{root}/"
        raise UsageError(f"no corpus entries under {where}")
    return [(path, load_trace(path)) for path in found]


def replays_for(trace: Trace) -> int:
    """How many replays judge an entry: ``trials_for`` the rate of its recorded status.  A
    failure comes back at the finding's rate; FIXED, recorded for a finding that came back in
    only k of n replays, comes back in the other n - k (one replay showing the fix of a
    timing-dependent finding is as much chance as one showing the finding).  1 for an entry
    that reproduced every time."""
    if trace.finding is None:
        return 1
    rate = trace.finding.reproduced
    if trace.status == "FIXED" and rate is not None:
        rate = rate.missed()
    return trials_for(rate)


__all__ = ["CORPUS_DIR", "entries", "read_entries", "replays_for", "trials_for", "entry_from_failure", "entry_path", "load_trace", "save"]


# -- duplicates ---------------------------------------------------------------------------------


def mechanism(trace: Trace) -> tuple:
    """The kinds of operation a finding goes through: tamper kinds, ``bad_output``, crash kinds,
    ``race``, ``fork``, ``stale_resume``, ``twin_recover``.  Two entries of one variant and
    category with the same mechanism show the same defect the same way."""
    kinds = set()
    for op in trace.operations:
        if op.name == "tamper":
            kinds.add(f"tamper:{op.how}")
        elif op.name in ("race", "fork", "stale_resume", "twin_recover"):
            kinds.add(op.name)
        if getattr(op, "bad_output", None) is not None:
            kinds.add("bad_output")
        crash = getattr(op, "crash", None)
        if crash is not None:
            kinds.add(f"crash:{crash.kind}")
    return tuple(sorted(kinds))


def _identity(trace: Trace) -> tuple:
    """What makes two entries of one target and variant witnesses of the same defect, shown
    the same way: category, verdict, the store under test, the mechanism."""
    return (trace.target, trace.variant, trace.finding.category, trace.finding.verdict,
            trace.versions.get("store-factory"), mechanism(trace))


def known(trace: Trace, root: Path = CORPUS_DIR) -> Path | None:
    """The entry under ``root`` that already shows ``trace``'s finding the same way (its own
    fingerprint, or a failing entry of the same ``_identity``: what ``duplicates`` would call
    redundant), or None.  A file that is not a readable entry is skipped here: ``fuzz`` only
    asks whether to write, and the commands that read the corpus refuse such files."""
    own = entry_path(trace, root)
    if own.exists():
        return own
    folder = own.parent
    if not folder.is_dir():
        return None
    wanted = _identity(trace)
    for path in sorted(folder.glob("*.json")):
        try:
            entry = load_trace(path)
        except UsageError:  # see the docstring
            continue
        if entry.finding is not None and entry.status != "FIXED" and _identity(entry) == wanted:
            return path
    return None


def duplicates(paths: list[Path]) -> list[tuple[Path, Path]]:
    """``(redundant entry, the entry kept)`` pairs: among the failing entries (not FIXED) of one
    target, variant, category, verdict and mechanism, the one kept is the best witness (one that
    reproduced every time, as measured: a timing-dependent entry whose rate was never measured
    does not count as one; then the fewest operations; then a checked reproduction script; then
    the older), and the others are redundant.  Every campaign writes what it found, so repeated campaigns pile up entries that
    show one defect the same way: each is replayed by CI and read by a maintainer for nothing."""
    groups: dict = {}
    for path in paths:
        trace = load_trace(path)
        if trace.finding is None or trace.status == "FIXED":
            continue
        key = _identity(trace)
        script = trace.finding.script or {}
        rate = trace.finding.reproduced
        flaky = (rate is not None and rate.k != rate.n) or trace.finding.unmeasured
        rank = (flaky, len(trace.operations), not script.get("checked"), trace.created, str(path))
        groups.setdefault(key, []).append((rank, path))
    out = []
    for members in groups.values():
        members.sort()
        out += [(path, members[0][1]) for _, path in members[1:]]
    return sorted(out)


def remove(entry: Path, reports_dir: Path) -> None:
    """Delete a corpus entry and its report (``<reports>/<target>/<variant>/<name>.md``)."""
    Path(reports_dir).joinpath(*Path(entry).with_suffix(".md").parts[-3:]).unlink(missing_ok=True)
    Path(entry).unlink()
