"""The trace format: a versioned JSON document, validated against its JSON Schema on load.

``fuzz/schemas/trace-v1.schema.json`` is the format's definition (see ``docs/trace-format.md``).
``load_trace`` refuses bad input with a ``UsageError`` whose one line names the file and the first
bad field; ``dump_trace`` writes atomically.  Traces are JSON, never pickle.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

import jsonschema

from adapters.files import atomic_write_text
from refmodel import (
    InvalidOperation,
    InvalidWorkflow,
    Model,
    Observation,
    Op,
    Workflow,
    World,
    op_from_json,
)

from .errors import UsageError
from .rate import Rate

FORMAT = "resumefuzz-trace"
VERSION = 1


SCHEMA_PATH = Path(__file__).with_name("schemas") / "trace-v1.schema.json"
# A trace is a few kilobytes (at most 64 operations); a file far larger is refused before it is
# read, so a hostile or broken file cannot stall a replay (checked by size, then by item counts,
# before any per-item validation).
MAX_FILE_BYTES = 4 * 1024 * 1024


@cache
def schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


# How a timing-dependent finding whose rate the campaign could not measure begins its detail
# (``fuzz.campaign`` writes it, ``Finding.unmeasured`` reads it).
UNMEASURED = "timing-dependent (not measured"


@dataclass(frozen=True)
class Finding:
    """The first divergence of a trace: category, property, the step (0-based) and why."""

    category: str
    property: str
    step: int
    detail: str
    verdict: str = "✗"  # "D" when the adapter documents the weakening
    citation: str = ""
    # The failure came back in k of n replays after its campaign (a finding Hypothesis could
    # not reproduce every time).  None: it reproduced every time it was run.
    reproduced: Rate | None = None
    # The reproduction script's last check: {"checked", "lines", "runs", "reproduced"}.
    script: dict | None = None
    # A maintainer's note shown at the top of the report: for an entry kept Unclassified, why no
    # category fits (issue 12: every Unclassified entry says so).  Dropped by a relabel.
    note: str = ""
    # Whose defect (docs/contract.md §5): "framework", "caller" (a D on caller-owned state) or
    # "store" (a third-party store's own, set where the framework's built-in store was judged
    # apart from it).  Entries written before the field read "framework".
    owner: str = "framework"

    def to_json(self) -> dict:
        doc = {"category": self.category, "property": self.property, "step": self.step,
               "detail": self.detail, "verdict": self.verdict, "owner": self.owner}
        if self.citation:
            doc["citation"] = self.citation
        if self.reproduced is not None:
            doc["reproduced"] = self.reproduced.to_json()
        if self.script:
            doc["script"] = dict(self.script)
        if self.note:
            doc["note"] = self.note
        return doc

    @property
    def rate(self) -> str:
        """``"k/n"`` for a finding that reproduced only sometimes, else ``""``."""
        r = self.reproduced
        return str(r) if r is not None and not r.always else ""

    @property
    def never_reproduced(self) -> bool:
        return self.reproduced is not None and self.reproduced.never

    @property
    def unmeasured(self) -> bool:
        """Timing-dependent, its rate never measured (the campaign stopped first): not known
        to reproduce every time, so never ranked as a witness that does."""
        return self.reproduced is None and self.detail.startswith(UNMEASURED)


@dataclass(frozen=True)
class Trace:
    workflow: Workflow
    operations: tuple  # tuple[Op, ...]
    target: str = "reference"
    variant: str = "default"
    observations: tuple = ()  # what the target observed, one per operation run
    expected: tuple = ()  # the reference's canonical observation, one per operation run
    finding: Finding | None = None
    status: str | None = None  # the replay status recorded when the entry was added
    versions: dict = field(default_factory=dict)
    fingerprint: str = ""
    created: str = ""

    def to_json(self) -> dict:
        doc = {
            "format": FORMAT,
            "version": VERSION,
            "workflow": self.workflow.to_json(),
            "target": self.target,
            "variant": self.variant,
            "operations": [op.to_json() for op in self.operations],
        }
        if self.observations:
            doc["observations"] = [o.to_json() for o in self.observations]
        if self.expected:
            doc["expected"] = [o.to_json() for o in self.expected]
        if self.finding is not None:
            doc["finding"] = self.finding.to_json()
        for key in ("status", "fingerprint", "created"):
            if getattr(self, key):
                doc[key] = getattr(self, key)
        if self.versions:
            doc["versions"] = dict(self.versions)
        return doc

    def with_(self, **changes) -> Trace:
        return replace(self, **changes)


def parse_trace(doc, source: str = "<trace>") -> Trace:
    """Validate and decode a trace document; ``UsageError`` names the first bad field."""
    if isinstance(doc, dict) and doc.get("format") == FORMAT and doc.get("version") != VERSION:
        raise UsageError(
            f"{source}: trace format version {doc.get('version')!r} is not supported "
            f"(this resumefuzz reads version {VERSION})"
        )
    _check_sizes(doc, source)
    errors = sorted(jsonschema.Draft7Validator(schema()).iter_errors(doc), key=_error_order)
    if errors:
        error = jsonschema.exceptions.best_match(errors)
        where = "/".join(str(p) for p in error.absolute_path) or "(document)"
        raise UsageError(f"{source}: field {where}: {_short(error.message)}")
    try:
        workflow = Workflow.from_json(doc["workflow"])
        ops = tuple(op_from_json(o) for o in doc["operations"])
        observations = tuple(Observation.from_json(o) for o in doc.get("observations", ()))
        expected = tuple(Observation.from_json(o) for o in doc.get("expected", ()))
    except (InvalidWorkflow, InvalidOperation, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{source}: {exc}") from None
    finding = doc.get("finding")
    if finding and finding.get("reproduced") is not None:
        rate = Rate.from_json(finding["reproduced"])
        if rate.k > rate.n:
            raise UsageError(f"{source}: field finding/reproduced: k={rate.k} exceeds n={rate.n}")
        finding = {**finding, "reproduced": rate}
    return Trace(
        workflow,
        ops,
        doc.get("target", "reference"),
        doc.get("variant", "default"),
        observations,
        expected,
        Finding(**finding) if finding else None,
        doc.get("status"),
        dict(doc.get("versions", {})),
        doc.get("fingerprint", ""),
        doc.get("created", ""),
    )


def load_trace(path: Path) -> Trace:
    """Read a trace file; ``UsageError`` (one line, naming the file) when it is not a valid one."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise UsageError(f"{path}: {size} bytes, more than a trace file may hold "
                             f"({MAX_FILE_BYTES}); not read")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:  # a binary file given by mistake: one line, no traceback
        raise UsageError(f"{path}: not a UTF-8 JSON trace (byte {exc.start} is not UTF-8)") from None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{path}: not JSON: {exc}") from None
    return parse_trace(doc, str(path))


def dump_trace(trace: Trace, path: Path) -> None:
    """Write ``trace`` atomically (a crash leaves the old file or the new one, never half)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(trace.to_json(), indent=2, ensure_ascii=False) + "\n")


def replay_on_model(trace: Trace, mutant: str | None = None) -> list[tuple[Op, Observation]]:
    """Apply the trace's operations to the refmodel, canonical choices throughout.

    ``UsageError`` when an operation does not apply to the world the earlier ones made.
    """
    model = Model(trace.workflow, mutant)
    world = World()
    out = []
    for i, op in enumerate(trace.operations):
        try:
            observation, world = model.step(world, op)[0]
        except InvalidOperation as exc:
            raise UsageError(f"operation {i} ({op.name}): {exc}") from None
        out.append((op, observation))
    return out


def _check_sizes(doc, source: str) -> None:
    """The schema's top-level ``maxItems``, checked before any item is validated."""
    if not isinstance(doc, dict):
        return
    for key, spec in schema().get("properties", {}).items():
        limit = spec.get("maxItems") if isinstance(spec, dict) else None
        value = doc.get(key)
        if limit is not None and isinstance(value, list) and len(value) > limit:
            raise UsageError(f"{source}: field {key}: {len(value)} items, at most {limit} allowed")


def _error_order(error) -> tuple:
    return (len(list(error.absolute_path)), str(list(error.absolute_path)))


def _short(message: str) -> str:
    message = " ".join(message.split())
    return message if len(message) <= 160 else message[:157] + "..."


def detours(trace) -> int:
    """Steps a maintainer could dismiss the witness by: a bad output on the way to a finding of
    another category (the divergence may be the bad value's doing), and a recovery of a run that
    had already finished (nothing was there to recover)."""
    f, last, count = trace.finding, {}, 0
    for i, op in enumerate(trace.operations[: f.step + 1]):
        if getattr(op, "bad_output", None) is not None and f.category != "InvalidPersist":
            count += 1
        if op.name in ("recover", "twin_recover") and last.get(op.thread) == "completed":
            count += 1
        state = trace.observations[i].state if i < len(trace.observations) else None
        if state is not None:
            last[op.thread if op.name != "fork" else op.new_thread] = state.status
    return count
