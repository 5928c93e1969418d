"""``pydantic-graph-persistence`` (``LatestStatePersistence``): one run's latest snapshot, kept
wherever its two callbacks say.  Here: one JSON document per run, ``workdir/latest.json``.

``LatestStatePersistence(load=..., save=...)`` takes ``async`` callbacks: ``load()`` returns the
latest snapshot as a dict, ``save(dict)`` stores it.  The file is replaced atomically (a
temporary file, then ``os.replace``), so a SIGKILL leaves the old document or the new one.
``load()`` returns ``None`` while nothing is stored: the package's docstring says only "returns a
dict with the latest state snapshot", and there is no snapshot to return yet.

The package keeps no history (``load_all`` raises ``NotImplementedError``): ``read`` hands the
harness the stored document, and fork is n/a.  Clone: the file, byte for byte.
Tamper(corrupt): the file cut in half (no JSON decoder accepts it).  One file per run
(``tamper_scope="thread"``); nothing outside ``workdir``.  A reproduction script builds the same
store with ``resumefuzz/stores/scripts/pydantic_graph_latest.py`` (``store_script``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from adapters.storeprotocol import StoreContext, StoreHandle, TamperTarget

FILE = "latest.json"


def _load_file(path: Path):
    try:
        return json.loads(path.read_bytes())
    except FileNotFoundError:
        return None


def _save_file(path: Path, doc: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, path)


def _corrupt(path: Path, target: TamperTarget) -> str:
    data = path.read_bytes()
    path.write_bytes(data[: max(1, len(data) // 2)])
    return f"run {target.thread_id}: {FILE} cut to {max(1, len(data) // 2)} of {len(data)} bytes"


def _clone(path: Path, dest: StoreContext) -> None:
    if path.exists():
        shutil.copyfile(path, Path(dest.workdir) / FILE)


def latest_persistence(ctx: StoreContext) -> StoreHandle:
    from pydantic_graph_persistence import LatestStatePersistence

    path = Path(ctx.workdir) / FILE

    async def load():
        return _load_file(path)

    async def save(doc: dict) -> None:
        _save_file(path, doc)

    return StoreHandle(
        store=LatestStatePersistence(load=load, save=save),
        read=lambda: _load_file(path),
        clone=lambda dest: _clone(path, dest),
        tamper=lambda target: _corrupt(path, target),
        tamper_hows=frozenset({"corrupt"}),
        tamper_scope="thread",
    )


latest_persistence.store_name = "latest"
latest_persistence.store_distribution = "pydantic-graph-persistence"
latest_persistence.store_script = "resumefuzz.stores.scripts.pydantic_graph_latest:SCRIPT"
