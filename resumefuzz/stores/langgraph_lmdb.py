"""``langgraph-checkpoint-lmdb`` (``LMDBSaver``): an embedded LMDB environment in
``workdir/lmdb``.

Clone: a byte copy of ``data.mdb`` (LMDB's copy-on-write pages make the file consistent at any
instant, which is what a crashed writer leaves).  Tamper(corrupt): the checkpoint's record
becomes 0xc1 bytes; the saver lists a thread by decoding every record of it, so every fork
sharing the LangGraph thread sees the damage (``tamper_scope="lineage"``).
"""

from __future__ import annotations

from adapters.storeprotocol import StoreContext, StoreHandle, TamperTarget

from ._common import GARBAGE, copy_tree

DIR = "lmdb"
MAP_SIZE = 1 << 28  # 256 MiB of address space; cases store kilobytes


def _open(path):
    import lmdb

    path.mkdir(exist_ok=True)
    return lmdb.open(str(path), max_dbs=4, map_size=MAP_SIZE)


def _corrupt(env, target: TamperTarget) -> str:
    key = f"{target.thread_id}\x00\x00{target.checkpoint_id}".encode()
    db = env.open_db(b"checkpoints")
    with env.begin(db=db, write=True) as txn:
        found = txn.get(key) is not None
        if found:
            txn.put(key, GARBAGE)
    return f"checkpoint {target.checkpoint_id}: record {'overwritten' if found else 'absent'}"


def _clone(src, dest: StoreContext) -> None:
    (dest.workdir / DIR).mkdir(exist_ok=True)
    copy_tree(src, dest.workdir / DIR, ("data.mdb",))


def lmdb_saver(ctx: StoreContext) -> StoreHandle:
    from langgraph_checkpoint_lmdb import LMDBSaver

    path = ctx.workdir / DIR
    env = _open(path)
    return StoreHandle(
        store=LMDBSaver(env),
        clone=lambda dest: _clone(path, dest),
        tamper=lambda target: _corrupt(env, target),
        tamper_hows=frozenset({"corrupt"}),
        tamper_scope="lineage",
        close=env.close,
    )


lmdb_saver.store_name = "lmdb"
lmdb_saver.store_distribution = "langgraph-checkpoint-lmdb"
lmdb_saver.store_script = "resumefuzz.stores.scripts.langgraph_lmdb:SCRIPT"  # its scripts' store
