"""pydantic-graph's own ``FileStatePersistence`` through the factory protocol: the self-test of
``--store`` on pydantic-graph (a persistence with history, so fork is expressible).

One run per factory call: ``workdir/run.json`` (and the framework's lock file beside it while a
write holds it).  Clone: the file, byte for byte.  Tamper(corrupt): the file cut in half.
"""

from __future__ import annotations

from pathlib import Path

from adapters.storeprotocol import StoreContext, StoreHandle, TamperTarget

from ._common import copy_tree

FILE = "run.json"


def _corrupt(path: Path, target: TamperTarget) -> str:
    data = path.read_bytes()
    path.write_bytes(data[: max(1, len(data) // 2)])
    return f"run {target.thread_id}: {FILE} cut to {max(1, len(data) // 2)} of {len(data)} bytes"


def file_persistence(ctx: StoreContext) -> StoreHandle:
    from pydantic_graph.persistence.file import FileStatePersistence

    path = Path(ctx.workdir) / FILE
    return StoreHandle(
        store=FileStatePersistence(path),
        clone=lambda dest: copy_tree(ctx.workdir, dest.workdir, [FILE]),
        tamper=lambda target: _corrupt(path, target),
        tamper_hows=frozenset({"corrupt"}),
        tamper_scope="thread",
    )


file_persistence.store_name = "pgfile"
file_persistence.store_distribution = "pydantic-graph"
