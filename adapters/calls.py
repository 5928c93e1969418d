"""The call log of a case: what an adapter did, as the Python source a user would write.

An adapter records each framework call it makes (``record_call``) in the case's ``workdir``; the
engine reads the log back (``read_calls``) while it replays a shrunk trace and hands it to
``Adapter.reproduction`` as ``Evidence.calls``, so that a finding's script repeats what the
adapter really did.  The log is a file in ``workdir`` because a worker may be killed between two
operations (or in the middle of one) and the next worker must append to the same log.
"""

from __future__ import annotations

import json
from pathlib import Path

CALL_LOG = "calls.jsonl"


def record_call(workdir: Path, source: str, kind: str = "call") -> None:
    """Append one framework call, as the Python source a user would write (concrete ids and
    values, the framework's own names), to the case's call log in ``workdir``.

    The engine reads the log while it replays a shrunk trace and hands it to
    ``Adapter.reproduction``: the script repeats what the adapter really did.  One line per
    call, appended (a worker killed mid-operation keeps the lines it wrote).
    """
    with open(Path(workdir) / CALL_LOG, "a") as f:
        f.write(json.dumps({"kind": kind, "src": source}) + "\n")


def read_calls(workdir: Path) -> list:
    """The call log of ``workdir``: ``(kind, source)`` pairs, oldest first."""
    try:
        lines = (Path(workdir) / CALL_LOG).read_text().splitlines()
    except FileNotFoundError:
        return []
    return [(d["kind"], d["src"]) for d in map(json.loads, lines) if d]

__all__ = ["CALL_LOG", "read_calls", "record_call"]
