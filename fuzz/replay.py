"""Replay corpus entries on their targets: FIXED, FAILED, CHANGED or ERROR.

- ``FIXED``: no divergence any more (the framework changed, or the entry was a mutant's and now
  runs on the reference);
- ``FAILED``: the first divergence has the entry's category still;
- ``CHANGED``: a divergence of another category;
- ``ERROR``: the entry could not be replayed (malformed file, unknown target or variant, a
  framework that is not installed, an operation the model does not admit); the reason says which.

Replay drives the same worker, barrier and ledger machinery as a campaign.

A corpus file is inert data: its ``target`` must name a registered target (``fuzz.targets``).
A dotted path (``mod:Class``) in a file is refused, never imported, unless the user named that
same target on the command line (``--target``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from refmodel import InvalidOperation, Model, World, classify

from .errors import ResumefuzzError
from .runner import Session, Settings
from .targets import prepare, resolve, resolve_registered, select_variants
from .trace import load_trace


@dataclass
class ReplayResult:
    path: str
    status: str
    recorded: str | None  # the category the entry was recorded with
    category: str | None  # the category found now (None when nothing diverged)
    detail: str

    def to_json(self) -> dict:
        return dict(self.__dict__)


class Replayer:
    """Prepares each target once, then replays entries on it."""

    def __init__(self, op_timeout: float = 30.0, target: str | None = None, adapters=None,
                 deadline: float | None = None):
        self._adapters: dict = dict(adapters or {})  # name -> an adapter prepared already
        self.op_timeout = op_timeout
        self.target = target  # replay on this target instead of the entry's own
        self.deadline = deadline  # time.monotonic() to stop by (raises OutOfTime), or None

    def _adapter(self, name: str):
        if name not in self._adapters:
            # The user's own --target may be any adapter; a name read from a file must be one
            # of the registry's: a file never names code to import.
            chosen = resolve(name) if name == self.target else resolve_registered(name)
            self._adapters[name] = prepare(chosen)
        return self._adapters[name]

    def replay(self, path: Path) -> ReplayResult:
        recorded = None
        try:
            trace = load_trace(path)
            recorded = trace.finding.category if trace.finding else None
            return self.replay_trace(trace, str(path))
        except (ResumefuzzError, InvalidOperation) as exc:
            return ReplayResult(str(path), "ERROR", recorded, None, str(exc))

    def replay_trace(self, trace, path: str = "<trace>") -> ReplayResult:
        recorded = trace.finding.category if trace.finding else None
        try:
            adapter = self._adapter(self.target or trace.target)
            variant = trace.variant if self.target is None else None
            variants = select_variants(adapter, [variant] if variant else None)
            settings = Settings(op_timeout=self.op_timeout, deadline=self.deadline)
            with Session(adapter, variants[0], settings=settings) as session:
                return self._run(path, trace, session, recorded)
        except (ResumefuzzError, InvalidOperation) as exc:
            return ReplayResult(path, "ERROR", recorded, None, str(exc))

    def _run(self, path, trace, session, recorded) -> ReplayResult:
        model, world = Model(trace.workflow), World()
        runner = session.case(trace.workflow)
        try:
            for i, op in enumerate(trace.operations):
                allowed = model.step(world, op)
                observed = runner.apply(op)
                divergence = classify(model, world, op, [o for o, _ in allowed], observed)
                if divergence is not None:
                    status = "FAILED" if divergence.category == recorded else "CHANGED"
                    detail = f"step {i + 1} ({op.name}): {divergence.detail}"
                    return ReplayResult(str(path), status, recorded, divergence.category, detail)
                world = next(w for o, w in allowed if o.same_as(observed))
        finally:
            runner.close()
        return ReplayResult(str(path), "FIXED", recorded, None,
                            f"all {len(trace.operations)} operations match the reference")
